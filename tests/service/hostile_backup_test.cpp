// Hostile backup archives uploaded to gpulab serve: a member with "../" or an absolute name, a
// symlink, hard link or device node named as the image, a member larger than the file holds, and
// a declared size of 10^12 bytes. Each is refused as BACKUP_CORRUPT, and nothing is left: no
// file in the backup folder (the upload's temporary included), no backup in the list, no image
// on the engine. The archives are made here by Python's tarfile, which writes what it is told.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "service_env.h"

namespace gpulab::service::testing {
namespace {

namespace fs = std::filesystem;

// Writes dir/<case>.tar for every case; false when python3 fails.
bool make_hostile_archives(const fs::path& dir) {
  const std::string script = R"PY(
import io, sys, tarfile
out = sys.argv[1]
manifest = b'{"format":1}'
def archive(name, image_info, image_data=b"", tail=True):
    with open(f"{out}/{name}.tar", "wb") as f:
        t = tarfile.open(fileobj=f, mode="w", format=tarfile.USTAR_FORMAT)
        t.addfile(image_info, io.BytesIO(image_data) if image_data else None)
        if tail:
            m = tarfile.TarInfo("gpulab-backup.json"); m.size = len(manifest)
            t.addfile(m, io.BytesIO(manifest))
        t.close()
def info(name, kind=tarfile.REGTYPE, size=0, link=""):
    i = tarfile.TarInfo(name); i.type = kind; i.size = size; i.linkname = link
    return i
archive("dotdot", info("../image.tar", size=4), b"abcd")
archive("absolute", info("/image.tar", size=4), b"abcd")
archive("symlink", info("image.tar", tarfile.SYMTYPE, link="/etc/passwd"))
archive("hardlink", info("image.tar", tarfile.LNKTYPE, link="/etc/shadow"))
archive("device", info("image.tar", tarfile.CHRTYPE))
archive("directory", info("image.tar", tarfile.DIRTYPE))
# Declares 1 MiB, holds 4 bytes and ends.
with open(f"{out}/short.tar", "wb") as f:
    f.write(info("image.tar", size=1 << 20).tobuf(format=tarfile.USTAR_FORMAT) + b"abcd")
# Declares 10^12 bytes (GNU base-256 size field), holds one block.
with open(f"{out}/huge.tar", "wb") as f:
    f.write(info("image.tar", size=10**12).tobuf(format=tarfile.GNU_FORMAT) + b"\0" * 1024)
)PY";
  const fs::path py = dir / "hostile.py";
  FILE* f = std::fopen(py.c_str(), "w");
  if (!f) return false;
  std::fputs(script.c_str(), f);
  std::fclose(f);
  const std::string cmd = "python3 '" + py.string() + "' '" + dir.string() + "' 2>'" +
                          (dir / "hostile.log").string() + "'";
  return std::system(cmd.c_str()) == 0;
}

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.insert(e.path().filename().string());
  return out;
}

// The engine's images that no gpulab service made: other tests on this engine commit and remove
// their containers' images meanwhile, each carrying its service's book label; an image a hostile
// upload got loaded would carry none.
size_t unlabelled_images(const docker::Client& client) {
  size_t n = 0;
  for (const auto& i : client.list_images().value_or_throw())
    n += i.labels.count("gpulab.book") == 0;
  return n;
}

class HostileBackup : public ServiceTest {};

TEST_F(HostileBackup, EveryHostileArchiveIsRefusedAndLeavesNothing) {
  start_service(four_gpu_config(engine_->host, unique_port_base()));
  if (HasFatalFailure() || IsSkipped()) return;
  const fs::path made = dir_ / "hostile";
  fs::create_directories(made);
  ASSERT_TRUE(make_hostile_archives(made)) << "python3 failed; see " << (made / "hostile.log");
  const auto images_before = unlabelled_images(*client_);
  const auto backups_before = files_in(svc_->backup_dir());
  const std::string& api = kApi;
  HttpClient c(svc_->url());
  int refused = 0;
  for (const char* name :
       {"dotdot", "absolute", "symlink", "hardlink", "device", "directory", "short", "huge"}) {
    auto r = c.put_file(api + "/backups/upload?backup_name=hostile-" + std::string(name),
                        (made / (std::string(name) + ".tar")).string());
    std::printf("%-9s -> HTTP %ld %s: %s\n", name, r.status, code(r).c_str(),
                r.json().value("message", std::string()).c_str());
    EXPECT_EQ(r.status / 100, 4) << name << ": " << r.body;
    EXPECT_EQ(code(r), "BACKUP_CORRUPT") << name << ": " << r.body;
    refused += code(r) == "BACKUP_CORRUPT";
  }
  EXPECT_EQ(refused, 8);
  EXPECT_EQ(files_in(svc_->backup_dir()), backups_before);
  auto list = c.get(api + "/backups");
  ASSERT_TRUE(ok(list)) << list.body;
  EXPECT_EQ(list.body.find("hostile-"), std::string::npos) << list.body;
  EXPECT_EQ(unlabelled_images(*client_), images_before);
}

}  // namespace
}  // namespace gpulab::service::testing
