// Calls std::filesystem::remove_all as gpulab does at exit; linked beside the trap library.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>

extern "C" int gpulab_trap_anchor();

int main(int argc, char** argv) {
  if (argc != 2 || gpulab_trap_anchor() != 42) return 2;
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir / "sub");
  std::ofstream(dir / "sub" / "file") << "x";
  std::error_code ec;
  const auto n = std::filesystem::remove_all(dir, ec);
  std::printf("removed %ju entries (%s)\n", static_cast<std::uintmax_t>(n),
              ec ? ec.message().c_str() : "ok");
  return ec || std::filesystem::exists(dir) ? 1 : 0;
}
