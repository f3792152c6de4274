// Reading a container's output: logs (whole or streamed, stdout/stderr demultiplexed) and exec
// (run a command in a running container, collect its output and exit code).
#include <thread>

#include "docker/client.h"
#include "docker/client_internal.h"

namespace gpulab::docker {

using detail::call;
using detail::call_json;
using detail::Query;

namespace {

std::string logs_query(const LogOptions& o, bool follow) {
  Query q;
  q.add("stdout", o.stdout_).add("stderr", o.stderr_).add("timestamps", o.timestamps);
  q.add("tail", o.tail < 0 ? std::string("all") : std::to_string(o.tail));
  if (o.since > 0) q.add("since", static_cast<long long>(o.since));
  if (follow) q.add("follow", true);
  return q.str();
}

}  // namespace

Status Client::logs_stream(const std::string& id, const LogOptions& options,
                           const std::function<bool(bool, std::string_view)>& on_chunk,
                           const std::atomic<bool>* cancel) const {
  // A TTY container's log is raw; otherwise every piece has an 8-byte stream header.
  auto info = inspect_container(id);
  if (!info.ok()) return info.error();
  detail::Demuxer demux(info->tty, on_chunk);
  HttpRequest r;
  r.target = path("/containers/" + url_encode(id) + "/logs" + logs_query(options, options.follow));
  r.on_data = [&](std::string_view chunk) { return demux.feed(chunk); };
  r.cancel = cancel;
  if (!options.follow) r.timeout = std::chrono::minutes(5);
  auto resp = call(*transport_, r, "read logs of container " + id);
  if (!resp.ok()) return resp.error();
  return ok_status();
}

Result<LogOutput> Client::logs(const std::string& id, const LogOptions& options) const {
  LogOutput out;
  LogOptions o = options;
  o.follow = false;
  auto st = logs_stream(
      id, o,
      [&](bool is_stderr, std::string_view data) {
        (is_stderr ? out.err : out.out).append(data);
        return true;
      },
      nullptr);
  if (!st.ok()) return st.error();
  return out;
}

Result<std::string> Client::exec_create(const std::string& container, const ExecSpec& spec) const {
  if (spec.cmd.empty()) return Error(Code::kInvalidArgument, "exec needs a command");
  Json body{{"AttachStdout", true},
            {"AttachStderr", true},
            {"AttachStdin", false},
            {"Tty", spec.tty},
            {"Cmd", spec.cmd}};
  if (!spec.env.empty()) body["Env"] = spec.env;
  if (!spec.user.empty()) body["User"] = spec.user;
  if (!spec.working_dir.empty()) body["WorkingDir"] = spec.working_dir;
  HttpRequest r;
  r.method = "POST";
  r.target = path("/containers/" + url_encode(container) + "/exec");
  r.headers.emplace_back("Content-Type", "application/json");
  r.body = body.dump();
  r.timeout = std::chrono::seconds(30);
  auto j = call_json(*transport_, r, "exec in container " + container);
  if (!j.ok()) return j.error();
  return detail::str(*j, "Id");
}

Result<LogOutput> Client::exec_start(const std::string& exec_id, bool tty) const {
  LogOutput out;
  detail::Demuxer demux(tty, [&](bool is_stderr, std::string_view data) {
    (is_stderr ? out.err : out.out).append(data);
    return true;
  });
  HttpRequest r;
  r.method = "POST";
  r.target = path("/exec/" + url_encode(exec_id) + "/start");
  r.headers.emplace_back("Content-Type", "application/json");
  r.body = Json{{"Detach", false}, {"Tty", tty}}.dump();
  // The engine answers 200 and then sends the raw stream until the command ends.
  r.on_data = [&](std::string_view chunk) { return demux.feed(chunk); };
  auto resp = call(*transport_, r, "run exec " + exec_id);
  if (!resp.ok()) return resp.error();
  return out;
}

Result<ExecInspect> Client::exec_inspect(const std::string& exec_id) const {
  HttpRequest r;
  r.target = path("/exec/" + url_encode(exec_id) + "/json");
  r.timeout = std::chrono::seconds(30);
  auto j = call_json(*transport_, r, "inspect exec " + exec_id);
  if (!j.ok()) return j.error();
  ExecInspect e;
  e.id = detail::str(*j, "ID");
  e.running = detail::boolean(*j, "Running");
  e.exit_code = static_cast<int>(detail::num(*j, "ExitCode", -1));
  e.pid = static_cast<int>(detail::num(*j, "Pid"));
  return e;
}

Result<ExecResult> Client::exec(const std::string& container, const std::vector<std::string>& cmd,
                                const std::vector<std::string>& env) const {
  ExecSpec spec;
  spec.cmd = cmd;
  spec.env = env;
  auto id = exec_create(container, spec);
  if (!id.ok()) return id.error();
  auto out = exec_start(*id);
  if (!out.ok()) return out.error();
  // The stream ends when the process does; the exit code may land a moment later.
  for (int i = 0; i < 100; ++i) {
    auto st = exec_inspect(*id);
    if (!st.ok()) return st.error();
    if (!st->running) return ExecResult{st->exit_code, std::move(out->out), std::move(out->err)};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Error(Code::kTimeout,
               "exec in container " + container + " still reported running after its output ended");
}

}  // namespace gpulab::docker
