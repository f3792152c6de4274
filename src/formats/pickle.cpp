// Pickle reader for the CIFAR archives: a stack machine over the opcodes that cPickle (protocol 2)
// and Python 3 (protocols 3-5) emit for dicts, lists, strings and numpy arrays.
#include "formats/pickle.h"

#include <fmt/format.h>
#include <cstring>

#include "core/strings.h"

namespace gpulab::formats::pickle {

namespace {

using Kind = Value::Kind;

// A CIFAR-100 training pickle holds about 150,000 values; far more means a hostile file that
// would take gigabytes of memory, not a data set.
constexpr size_t kMaxValues = size_t{1} << 22;

// Thrown inside the parser only; parse() turns it into a Result.
struct ParseError {
  std::string what;
};

class Reader {
 public:
  explicit Reader(std::string_view data) : d_(data) {}

  Document run() {
    while (true) {
      if (pos_ >= d_.size()) fail("the file ends before the pickle's STOP (truncated?)");
      op_pos_ = pos_;
      const auto op = static_cast<unsigned char>(d_[pos_++]);
      if (op == '.') break;
      step(op);
    }
    if (stack_.size() != 1) fail("the pickle leaves " + std::to_string(stack_.size()) + " values");
    doc_.root = stack_.back();
    return std::move(doc_);
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    throw ParseError{fmt::format("{} (at byte {})", msg, op_pos_)};
  }
  ValuePtr make(Kind k) {
    if (doc_.values.size() >= kMaxValues)
      fail("more than " + std::to_string(kMaxValues) + " values (not a data set pickle)");
    doc_.values.push_back(std::make_unique<Value>());
    doc_.values.back()->kind = k;
    return doc_.values.back().get();
  }
  ValuePtr make_int(int64_t i) {
    auto v = make(Kind::kInt);
    v->i = i;
    return v;
  }
  ValuePtr make_text(Kind k, std::string s) {
    auto v = make(k);
    v->s = std::move(s);
    return v;
  }
  // The decimal key of the text memo opcodes (PUT, GET).
  uint64_t decimal_line() {
    const std::string s = line();
    if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos)
      fail("bad memo key '" + printable(s) + "'");
    return std::stoull(s);
  }
  std::string_view take(uint64_t n) {
    if (n > d_.size() - pos_) fail("the file ends inside a value (truncated?)");
    auto s = d_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  uint64_t uint_le(int bytes) {
    auto s = take(bytes);
    uint64_t v = 0;
    for (int k = bytes - 1; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(s[k]);
    return v;
  }
  std::string line() {
    auto end = d_.find('\n', pos_);
    if (end == std::string_view::npos) fail("the file ends inside a text line (truncated?)");
    std::string s(d_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  ValuePtr pop() {
    if (stack_.size() <= floor()) fail("stack underflow");
    auto v = stack_.back();
    stack_.pop_back();
    return v;
  }
  ValuePtr& top() {
    if (stack_.size() <= floor()) fail("stack underflow");
    return stack_.back();
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  // Pops everything above the last MARK, and the mark itself.
  std::vector<ValuePtr> pop_mark() {
    if (marks_.empty()) fail("no MARK on the stack");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<ValuePtr> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  void push(ValuePtr v) { stack_.push_back(std::move(v)); }
  void memo_put(uint64_t key) { memo_[key] = top(); }
  ValuePtr memo_get(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) fail("memo key " + std::to_string(key) + " is not defined");
    return it->second;
  }
  ValuePtr tuple(std::vector<ValuePtr> items) {
    auto t = make(Kind::kTuple);
    t->items = std::move(items);
    return t;
  }
  void set_items(Value& dict, const std::vector<ValuePtr>& kv) {
    if (dict.kind != Kind::kDict) fail("SETITEM(S) on a value that is not a dict");
    if (kv.size() % 2) fail("SETITEMS with an odd number of values");
    for (size_t k = 0; k < kv.size(); k += 2) dict.entries.emplace_back(kv[k], kv[k + 1]);
  }
  void append(Value& list, const std::vector<ValuePtr>& items) {
    if (list.kind != Kind::kList) fail("APPEND(S) on a value that is not a list");
    list.items.insert(list.items.end(), items.begin(), items.end());
  }
  ValuePtr call(ValuePtr callable, ValuePtr args) {
    auto c = make(Kind::kCall);
    c->items = {std::move(callable), std::move(args)};
    return c;
  }
  // Python 3 writes bytes under protocol 2 as _codecs.encode(text, 'latin1'): the one call
  // evaluated here, so such bytes (dict keys included) read as bytes.
  ValuePtr reduce(ValuePtr fn, ValuePtr args) {
    if (fn->kind == Kind::kGlobal && fn->s == "_codecs.encode" && args->kind == Kind::kTuple &&
        args->items.size() == 2 && args->items[0]->kind == Kind::kString &&
        args->items[1]->is_text() && args->items[1]->s == "latin1") {
      auto bytes = latin1_from_utf8(args->items[0]->s);
      if (!bytes) fail(bytes.error().message);
      return make_text(Kind::kBytes, std::move(*bytes));
    }
    return call(std::move(fn), std::move(args));
  }
  ValuePtr long_le(std::string_view bytes) {
    if (bytes.size() > 8) fail("integer wider than 64 bits");
    uint64_t v = 0;
    for (size_t k = bytes.size(); k-- > 0;) v = (v << 8) | static_cast<unsigned char>(bytes[k]);
    if (!bytes.empty() && bytes.size() < 8 && (static_cast<unsigned char>(bytes.back()) & 0x80))
      v |= ~uint64_t{0} << (8 * bytes.size());  // sign-extend
    return make_int(static_cast<int64_t>(v));
  }

  // Opcodes of PROTO, FRAME, MARK, POP, DUP and NONE; false when `op` is none of them.
  bool step_stack(unsigned char op) {
    switch (op) {
      case 0x80:
        take(1);
        break;  // PROTO
      case 0x95:
        take(8);
        break;  // FRAME: the data that follows is read as usual
      case '(':
        marks_.push_back(stack_.size());
        break;  // MARK
      case '0':
        pop();
        break;  // POP
      case '1':
        pop_mark();
        break;  // POP_MARK
      case '2':
        push(top());
        break;  // DUP
      case 'N':
        push(make(Kind::kNone));
        break;
      default:
        return false;
    }
    return true;
  }

  // Opcodes of booleans, integers and floats; false when `op` is none of them.
  bool step_number(unsigned char op) {
    switch (op) {
      case 0x88:
      case 0x89: {  // NEWTRUE, NEWFALSE
        auto b = make(Kind::kBool);
        b->i = op == 0x88;
        push(b);
        break;
      }
      case 'J':
        push(make_int(static_cast<int32_t>(uint_le(4))));
        break;  // BININT
      case 'K':
        push(make_int(static_cast<int64_t>(uint_le(1))));
        break;  // BININT1
      case 'M':
        push(make_int(static_cast<int64_t>(uint_le(2))));
        break;  // BININT2
      case 0x8a:
        push(long_le(take(uint_le(1))));
        break;  // LONG1
      case 0x8b:
        push(long_le(take(uint_le(4))));
        break;  // LONG4
      case 'I':
      case 'L': {  // INT, LONG (text)
        std::string s = line();
        if (!s.empty() && s.back() == 'L') s.pop_back();
        if (s == "00" || s == "01") {
          auto b = make(Kind::kBool);
          b->i = s == "01";
          push(b);
        } else {
          try {
            push(make_int(std::stoll(s)));
          } catch (const std::exception&) {
            fail("bad integer '" + printable(s) + "'");
          }
        }
        break;
      }
      case 'G': {  // BINFLOAT, big-endian
        auto s = take(8);
        uint64_t bits = 0;
        for (char c : s) bits = (bits << 8) | static_cast<unsigned char>(c);
        auto f = make(Kind::kFloat);
        std::memcpy(&f->f, &bits, 8);
        push(f);
        break;
      }
      case 'F': {
        auto f = make(Kind::kFloat);
        f->f = std::strtod(line().c_str(), nullptr);
        push(f);
        break;
      }
      default:
        return false;
    }
    return true;
  }

  // Opcodes of strings and bytes; false when `op` is none of them.
  bool step_text(unsigned char op) {
    switch (op) {
      case 'T':
        push(make_text(Kind::kBytes, std::string(take(uint_le(4)))));
        break;  // BINSTRING
      case 'U':
        push(make_text(Kind::kBytes, std::string(take(uint_le(1)))));
        break;  // SHORT_
      case 'B':
        push(make_text(Kind::kBytes, std::string(take(uint_le(4)))));
        break;  // BINBYTES
      case 'C':
        push(make_text(Kind::kBytes, std::string(take(uint_le(1)))));
        break;  // SHORT_
      case 0x8e:
      case 0x96:  // BINBYTES8, BYTEARRAY8
        push(make_text(Kind::kBytes, std::string(take(uint_le(8)))));
        break;
      case 'X':
        push(make_text(Kind::kString, std::string(take(uint_le(4)))));
        break;  // BINUNICODE
      case 0x8c:
        push(make_text(Kind::kString, std::string(take(uint_le(1)))));
        break;
      case 0x8d:
        push(make_text(Kind::kString, std::string(take(uint_le(8)))));
        break;
      case 'S': {  // STRING: a quoted repr; CIFAR never uses escapes in it
        std::string s = line();
        if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"')) s = s.substr(1, s.size() - 2);
        push(make_text(Kind::kBytes, s));
        break;
      }
      case 'V':
        push(make_text(Kind::kString, line()));
        break;  // UNICODE (ASCII assumed)
      default:
        return false;
    }
    return true;
  }

  // Opcodes of lists and sets; false when `op` is none of them.
  bool step_list(unsigned char op) {
    switch (op) {
      case ']':
        push(make(Kind::kList));
        break;
      case 'l': {
        auto l = make(Kind::kList);
        l->items = pop_mark();
        push(l);
        break;
      }
      case 'a': {
        auto v = pop();
        append(*top(), {v});
        break;
      }
      case 'e': {
        auto items = pop_mark();
        append(*top(), items);
        break;
      }
      case 0x8f:
        push(make(Kind::kList));
        break;      // EMPTY_SET: kept as a list
      case 0x90: {  // ADDITEMS
        auto items = pop_mark();
        append(*top(), items);
        break;
      }
      case 0x91: {  // FROZENSET
        auto l = make(Kind::kList);
        l->items = pop_mark();
        push(l);
        break;
      }
      default:
        return false;
    }
    return true;
  }

  // Opcodes of tuples and dicts; false when `op` is none of them.
  bool step_tuple_dict(unsigned char op) {
    switch (op) {
      case ')':
        push(tuple({}));
        break;
      case 't':
        push(tuple(pop_mark()));
        break;
      case 0x85: {
        auto a = pop();
        push(tuple({a}));
        break;
      }
      case 0x86: {
        auto b = pop();
        auto a = pop();
        push(tuple({a, b}));
        break;
      }
      case 0x87: {
        auto c = pop();
        auto b = pop();
        auto a = pop();
        push(tuple({a, b, c}));
        break;
      }
      case '}':
        push(make(Kind::kDict));
        break;
      case 'd': {
        auto d = make(Kind::kDict);
        set_items(*d, pop_mark());
        push(d);
        break;
      }
      case 's': {
        auto v = pop();
        auto k = pop();
        set_items(*top(), {k, v});
        break;
      }
      case 'u': {
        auto kv = pop_mark();
        set_items(*top(), kv);
        break;
      }
      default:
        return false;
    }
    return true;
  }

  // Opcodes of globals, calls and objects; false when `op` is none of them.
  bool step_object(unsigned char op) {
    switch (op) {
      case 'c': {  // GLOBAL module\nname\n
        std::string module = line();
        std::string name = line();
        push(make_text(Kind::kGlobal, module + "." + name));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        auto name = pop();
        auto module = pop();
        if (!name->is_text() || !module->is_text()) fail("STACK_GLOBAL needs two strings");
        push(make_text(Kind::kGlobal, module->s + "." + name->s));
        break;
      }
      case 'R':
      case 0x81: {  // REDUCE, NEWOBJ
        auto args = pop();
        auto fn = pop();
        push(reduce(fn, args));
        break;
      }
      case 0x92: {  // NEWOBJ_EX: kwargs dropped
        pop();
        auto args = pop();
        auto cls = pop();
        push(call(cls, args));
        break;
      }
      case 'o': {  // OBJ
        auto items = pop_mark();
        if (items.empty()) fail("OBJ without a class");
        auto cls = items.front();
        items.erase(items.begin());
        push(call(cls, tuple(std::move(items))));
        break;
      }
      case 'b': {  // BUILD
        auto state = pop();
        auto& obj = top();
        if (obj->kind != Kind::kCall) fail("BUILD on a value that is not an object");
        obj->state = state;
        break;
      }
      default:
        return false;
    }
    return true;
  }

  // Opcodes of the memo; false when `op` is none of them.
  bool step_memo(unsigned char op) {
    switch (op) {
      case 'p':
        memo_put(decimal_line());
        break;  // PUT
      case 'q':
        memo_put(uint_le(1));
        break;  // BINPUT
      case 'r':
        memo_put(uint_le(4));
        break;  // LONG_BINPUT
      case 0x94:
        memo_put(memo_.size());
        break;  // MEMOIZE
      case 'g':
        push(memo_get(decimal_line()));
        break;
      case 'h':
        push(memo_get(uint_le(1)));
        break;
      case 'j':
        push(memo_get(uint_le(4)));
        break;
      case 0x98:
        break;  // READONLY_BUFFER: no effect on data
      default:
        return false;
    }
    return true;
  }

  // One opcode: each family of opcodes has its step.
  void step(unsigned char op) {
    if (step_stack(op) || step_number(op) || step_text(op) || step_list(op) ||
        step_tuple_dict(op) || step_object(op) || step_memo(op))
      return;
    fail(fmt::format("unsupported pickle opcode 0x{:02x}", op));
  }

  std::string_view d_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, ValuePtr> memo_;
  Document doc_;
};

}  // namespace

ValuePtr Value::get(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k->is_text() && k->s == key) return v;
  return nullptr;
}

Result<std::string> latin1_from_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t k = 0; k < s.size(); ++k) {
    auto c = static_cast<unsigned char>(s[k]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if ((c & 0xE0) == 0xC0 && k + 1 < s.size() && c <= 0xC3) {
      out.push_back(static_cast<char>(((c & 0x03) << 6) | (s[++k] & 0x3F)));
    } else {
      return Result<std::string>(Code::kDataError, "latin1 bytes hold a character above U+00FF");
    }
  }
  return out;
}

Result<Document> parse(std::string_view data) {
  try {
    return Reader(data).run();
  } catch (const ParseError& e) {
    return Result<Document>(Code::kDataError, "not a readable pickle: " + e.what);
  }
}

}  // namespace gpulab::formats::pickle
