// Recursive-descent reader for the small XML subset nvidia-smi writes (see xml.h).
#include "gpu/xml.h"

#include <cctype>

#include "core/strings.h"

namespace gpulab::gpu {

const XmlElement* XmlElement::child(std::string_view n) const {
  for (const auto& c : children) {
    if (c.name == n) return &c;
  }
  return nullptr;
}

std::vector<const XmlElement*> XmlElement::children_named(std::string_view n) const {
  std::vector<const XmlElement*> out;
  for (const auto& c : children) {
    if (c.name == n) out.push_back(&c);
  }
  return out;
}

std::optional<std::string> XmlElement::text_at(std::string_view path) const {
  const XmlElement* e = this;
  for (const auto& part : split(path, '/')) {
    e = e->child(part);
    if (e == nullptr) return std::nullopt;
  }
  return e->text;
}

namespace {

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Result<XmlElement> document() {
    skip_misc();
    if (at_end() || s_[pos_] != '<') return error("expected the root element");
    XmlElement root;
    if (!element(root, 0)) return error(why_);
    skip_misc();
    if (!at_end()) return error("content after the root element");
    return root;
  }

 private:
  bool at_end() const { return pos_ >= s_.size(); }
  bool starts(std::string_view t) const { return s_.substr(pos_, t.size()) == t; }
  void skip_ws() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool skip_past(std::string_view end) {
    size_t at = s_.find(end, pos_);
    if (at == std::string_view::npos) return false;
    pos_ = at + end.size();
    return true;
  }
  // Prolog, comments, DOCTYPE and processing instructions between elements.
  void skip_misc() {
    for (;;) {
      skip_ws();
      if (starts("<?")) {
        if (!skip_past("?>")) pos_ = s_.size();
      } else if (starts("<!--")) {
        if (!skip_past("-->")) pos_ = s_.size();
      } else if (starts("<!")) {
        if (!skip_past(">")) pos_ = s_.size();
      } else {
        return;
      }
    }
  }
  Result<XmlElement> error(const std::string& what) const {
    return Error{Code::kDataError, "malformed XML at byte " + std::to_string(pos_) + ": " + what};
  }
  bool fail(std::string why) {
    why_ = std::move(why);
    return false;
  }

  std::string name() {
    size_t start = pos_;
    while (!at_end()) {
      char c = s_[pos_];
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
          c == ':')
        ++pos_;
      else
        break;
    }
    return std::string(s_.substr(start, pos_ - start));
  }

  static std::string decode(std::string_view raw) {
    std::string out;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '&') {
        out += raw[i];
        continue;
      }
      size_t semi = raw.find(';', i);
      std::string_view ent = semi == std::string_view::npos ? "" : raw.substr(i + 1, semi - i - 1);
      if (ent == "amp")
        out += '&';
      else if (ent == "lt")
        out += '<';
      else if (ent == "gt")
        out += '>';
      else if (ent == "quot")
        out += '"';
      else if (ent == "apos")
        out += '\'';
      else {
        out += '&';
        continue;
      }
      i = semi;
    }
    return out;
  }

  bool element(XmlElement& e, int depth) {
    if (depth > 64) return fail("nesting too deep");
    ++pos_;  // '<'
    e.name = name();
    if (e.name.empty()) return fail("expected an element name");
    for (;;) {
      skip_ws();
      if (at_end()) return fail("unterminated start tag <" + e.name + ">");
      if (starts("/>")) {
        pos_ += 2;
        return true;
      }
      if (s_[pos_] == '>') {
        ++pos_;
        break;
      }
      std::string key = name();
      skip_ws();
      if (key.empty() || at_end() || s_[pos_] != '=')
        return fail("bad attribute in <" + e.name + ">");
      ++pos_;
      skip_ws();
      if (at_end() || (s_[pos_] != '"' && s_[pos_] != '\''))
        return fail("unquoted attribute value");
      char q = s_[pos_++];
      size_t end = s_.find(q, pos_);
      if (end == std::string_view::npos) return fail("unterminated attribute value");
      e.attributes[key] = decode(s_.substr(pos_, end - pos_));
      pos_ = end + 1;
    }
    std::string text;
    for (;;) {
      if (at_end()) return fail("missing </" + e.name + ">");
      if (starts("</")) {
        pos_ += 2;
        std::string close = name();
        skip_ws();
        if (close != e.name || at_end() || s_[pos_] != '>')
          return fail("expected </" + e.name + ">, found </" + close + ">");
        ++pos_;
        e.text = trim(decode(text));
        return true;
      }
      if (starts("<!--") || starts("<?")) {
        skip_misc();
        continue;
      }
      if (s_[pos_] == '<') {
        XmlElement c;
        if (!element(c, depth + 1)) return false;
        e.children.push_back(std::move(c));
        continue;
      }
      size_t next = s_.find('<', pos_);
      if (next == std::string_view::npos) next = s_.size();
      text += s_.substr(pos_, next - pos_);
      pos_ = next;
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
  std::string why_;
};

}  // namespace

Result<XmlElement> parse_xml(std::string_view text) {
  return Parser(text).document();
}

}  // namespace gpulab::gpu
