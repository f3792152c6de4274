"""A fork server for the parity tests' Python references: imports torch, torchvision and
transformers once, then runs each reference in a child forked from that state.

Importing them takes 3 to 6 s of CPU in every reference process; a test run starts a few hundred.
A child runs the same script on the same interpreter and libraries as a fresh process would, with
the client's arguments, working directory, environment and standard streams (passed over the
socket), in a process group of its own that is killed when the client goes away (a test's
timeout). The client (pyref_client.py.in) runs the interpreter itself when no server answers, or
when the server finds its environment differs in a variable that libraries read only when loaded.

usage: pyref_server.py start SOCKET | stop SOCKET
"""

import array
import json
import os
import selectors
import signal
import socket
import sys
import time

# Read once, when a library is loaded (OpenMP, MKL, the allocator, Python itself): a client whose
# value differs is told to run its own interpreter (start_child compares them).
LOAD_TIME_PREFIXES = ("OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "LD_", "PYTHON", "MALLOC_",
                      "TORCH_", "PYTORCH_", "CUDA_", "HF_", "TRANSFORMERS_", "TOKENIZERS_", "LC_",
                      "LANG")
IDLE_EXIT_SECONDS = 3 * 3600  # a server left behind (a killed run) ends by itself
MAX_HEADER = 1 << 20


def load_time_env(env):
    return {k: v for k, v in env.items() if k.startswith(LOAD_TIME_PREFIXES)}


def preimport():
    for name in ("numpy", "torch", "torchvision", "transformers", "safetensors", "tokenizers"):
        try:
            __import__(name)
        except Exception:  # a reference that needs it imports it itself, and fails there
            pass
    # transformers imports its model classes lazily: the ones the references use, now.
    try:
        from transformers import (AutoConfig, AutoModelForCausalLM, AutoTokenizer,  # noqa: F401
                                  GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM)
    except Exception:
        pass


def recv_request(conn):
    """The header (JSON: argv, cwd, env) and the client's stdin, stdout and stderr."""
    conn.settimeout(10)  # a client that connects and says nothing must not stall the others
    fds = array.array("i")
    try:
        data, ancdata, _, _ = conn.recvmsg(MAX_HEADER, socket.CMSG_LEN(3 * fds.itemsize))
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
        while not data.endswith(b"\n"):
            more = conn.recv(MAX_HEADER)
            if not more:
                raise ValueError("the client closed before its request ended")
            data += more
        if len(fds) != 3:
            raise ValueError("expected 3 file descriptors, got %d" % len(fds))
        request = json.loads(data)
        return {k: request[k] for k in ("argv", "cwd", "env")}, list(fds)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def run_child(request, fds):
    """In the forked child: become the reference process, run it, exit with its status."""
    os.setpgid(0, 0)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    import tempfile
    tempfile.tempdir = None  # TMPDIR as the client has it, not as it was at import
    # The server's own stream objects, now on the client's descriptors: made at start-up with the
    # same environment (PYTHONUNBUFFERED, the locale), so buffered and encoded as the client's.
    sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__
    code = 0
    try:
        argv = request["argv"]
        if argv[0] == "-c":
            sys.argv = ["-c"] + argv[2:]
            sys.path[0] = ""  # was the server's folder; a fresh `python -c` has the current one
            exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
        else:
            import runpy
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # as a fresh `python SCRIPT`
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException as e:
        import traceback
        # From the script's first frame on, as a fresh interpreter prints it.
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, "<frozen runpy>"):
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code & 0xFF)


class Server:
    def __init__(self, path):
        self.sel = selectors.DefaultSelector()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self.sel.register(self.listener, selectors.EVENT_READ, ("accept", None))
        self.children = {}  # pid -> (conn, pidfd)
        self.last_active = time.monotonic()
        self.env = load_time_env(os.environ)

    def start_child(self, conn):
        try:
            request, fds = recv_request(conn)
        except (OSError, ValueError, KeyError) as e:
            conn.close()
            print("pyref: bad request: %s" % e, file=sys.stderr)
            return
        if load_time_env(request["env"]) != self.env:
            conn.sendall(b"fallback\n")  # the client runs its own interpreter
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        pid = os.fork()
        if pid == 0:
            self.close_inherited(conn)
            run_child(request, fds)
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        self.children[pid] = (conn, pidfd)
        self.sel.register(pidfd, selectors.EVENT_READ, ("exit", pid))
        self.sel.register(conn, selectors.EVENT_READ, ("client", pid))

    def close_inherited(self, conn):
        """In a child: the server's sockets and the other children's are not the reference's."""
        for other, pidfd in self.children.values():
            other.close()
            os.close(pidfd)
        self.sel.close()
        self.listener.close()
        conn.close()

    def finish(self, pid, gone):
        conn, pidfd = self.children.pop(pid)
        self.sel.unregister(pidfd)
        self.sel.unregister(conn)
        if gone:  # the client was killed (a timeout): its reference goes with it
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, status = os.waitpid(pid, 0)
        if not gone:
            if os.WIFSIGNALED(status):
                reply = "signal %d\n" % os.WTERMSIG(status)
            else:
                reply = "exit %d\n" % os.WEXITSTATUS(status)
            try:
                conn.sendall(reply.encode())
            except OSError:
                pass
        os.close(pidfd)
        conn.close()

    def serve(self):
        while True:
            events = self.sel.select(timeout=60)
            if not events and not self.children and \
                    time.monotonic() - self.last_active > IDLE_EXIT_SECONDS:
                return
            for key, _ in events:
                what, pid = key.data
                self.last_active = time.monotonic()
                if what == "accept":
                    conn, _ = self.listener.accept()
                    self.start_child(conn)
                elif pid in self.children:  # one select may bring both of a child's events
                    # "client": its side readable, so it closed (killed); "exit": the child ended.
                    self.finish(pid, gone=(what == "client"))


def start(path):
    if os.path.exists(path):
        stop(path)
    preimport()
    ready_r, ready_w = os.pipe()
    if os.fork() != 0:  # the caller (a ctest fixture) returns once the socket listens
        os.close(ready_w)
        ok = os.read(ready_r, 16)
        sys.exit(0 if ok == b"ok" else 1)
    os.close(ready_r)
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    # Not the caller's streams: ctest waits until every holder of a test's output has closed it.
    devnull = os.open(os.devnull, os.O_RDWR)
    log = os.open(path + ".log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for fd, to in ((0, devnull), (1, log), (2, log)):
        os.dup2(to, fd)
    server = Server(path)
    with open(path + ".pid", "w") as f:
        f.write(str(os.getpid()))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    os.write(ready_w, b"ok")
    os.close(ready_w)
    try:
        server.serve()
    finally:
        for p in (path, path + ".pid"):
            try:
                os.unlink(p)
            except OSError:
                pass


def stop(path):
    try:
        with open(path + ".pid") as f:
            pid = int(f.read())
        # A server killed outright left its pid file: that number may be another process now.
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmdline = f.read().split(b"\0")
        if os.fsencode(path) not in cmdline or not any(a.endswith(b"pyref_server.py") for a in cmdline):
            raise ValueError("pid %d is not this socket's server" % pid)
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):  # gone, or a zombie that this machine's init may never reap
            with open("/proc/%d/status" % pid) as f:
                if any(line.startswith("State:") and "Z" in line for line in f):
                    break
            time.sleep(0.05)
    except (OSError, ValueError):
        pass
    for p in (path, path + ".pid", path + ".log"):
        try:
            os.unlink(p)
        except OSError:
            pass


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("start", "stop"):
        sys.exit(__doc__)
    (start if sys.argv[1] == "start" else stop)(sys.argv[2])
