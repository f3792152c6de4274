// The image build flow, with the seed's messages; every check happens before anything is built.
#include "builder/image_build.h"

#include <unistd.h>

#include <istream>
#include <ostream>

#include "builder/build_context.h"
#include "builder/engine.h"
#include "builder/recipe.h"
#include "core/strings.h"
#include "gpu/detect.h"

namespace gpulab::builder {

namespace fs = std::filesystem;

namespace {

const char* const kRule = "==========================================";

docker::LabEngine checked_engine(const ImageBuildOptions& opts, std::ostream& out) {
  docker::LabEngine engine = connect_engine(opts.docker_host);
  out << "Docker environment check passed\n";
  return engine;
}

// The seed's vendor detection lines, from gpulab's own discovery.
std::vector<std::string> detect_vendors(const ImageBuildOptions& opts, std::istream& in,
                                        std::ostream& out) {
  gpu::DetectOptions d;
  d.root = opts.detect_root;
  d.host_checks = false;
  d.processes = false;
  auto inv = gpu::detect(d);
  bool nvidia = false, amd = false;
  for (const auto& g : inv.gpus) (g.vendor == gpu::Vendor::kNvidia ? nvidia : amd) = true;
  out << "Checking NVIDIA environment...\n"
      << (nvidia ? "NVIDIA environment check passed\n" : "No NVIDIA GPU found\n");
  out << "Checking ROCm environment...\n"
      << (amd ? "ROCm environment check passed\n" : "No AMD GPU found\n");
  if (nvidia && amd) {
    out << "\nPlease select the image type to build:\n1) NVIDIA image\n2) ROCm image\n"
           "3) Build both NVIDIA and ROCm images\n";
    if (opts.yes) {
      out << "-y given: building both\n";
      return {"nvidia", "rocm"};
    }
    out << "Choice [1-3]: " << std::flush;
    std::string choice;
    std::getline(in, choice);
    choice = trim(choice);
    if (choice == "1") return {"nvidia"};
    if (choice == "2") return {"rocm"};
    if (choice == "3") return {"nvidia", "rocm"};
    throw Exception(Code::kInvalidArgument, "invalid choice '" + choice + "'",
                    "answer 1, 2 or 3, or pass --vendor nvidia|rocm");
  }
  if (nvidia) {
    out << "NVIDIA environment detected, building NVIDIA image\n";
    return {"nvidia"};
  }
  if (amd) {
    out << "ROCm environment detected, building ROCm image\n";
    return {"rocm"};
  }
  out << "Neither NVIDIA nor ROCm environment detected, building the CPU image\n";
  return {"cpu"};
}

bool confirm(std::istream& in, std::ostream& out) {
  out << "Confirm building the above images? (y/N): " << std::flush;
  std::string answer;
  if (!std::getline(in, answer)) return false;
  answer = to_lower(trim(answer));
  return answer == "y" || answer == "yes";
}

}  // namespace

std::vector<BuiltImage> build_lab_images(const ImageBuildOptions& opts, std::istream& in,
                                         std::ostream& out) {
  out << kRule << "\n        GPU Lab Image Builder\n" << kRule << "\n";
  auto images = images_dir(opts.recipes).value_or_throw();
  const docker::LabEngine engine = checked_engine(opts, out);

  std::vector<const Recipe*> chosen;
  std::vector<std::string> vendors =
      opts.vendor == "auto" ? detect_vendors(opts, in, out) : std::vector<std::string>{opts.vendor};
  for (const auto& v : vendors) chosen.push_back(find_recipe(v).value_or_throw());

  out << "\n" << kRule << "\nThe following Docker images will be built:\n" << kRule << "\n";
  for (const Recipe* r : chosen) {
    std::string tag = opts.tag.empty() ? r->tag : opts.tag;
    out << "\u2022 " << tag << " image (using images/" << r->files.front().recipe_path << ")\n"
        << "  Based on: " << (opts.base.empty() ? r->default_base : opts.base) << "\n"
        << "  Includes: " << r->includes << "\n";
  }
  out << "\n";
  if (!opts.yes && !confirm(in, out)) {
    throw Exception(Code::kInvalidArgument, "Build cancelled", "answer y, or pass -y");
  }

  out << "\n" << kRule << "\nChecking required files for all images...\n" << kRule << "\n";
  std::vector<std::string> missing;
  for (const Recipe* r : chosen) {
    out << "Checking required files for " << r->vendor << " image...\n";
    auto m = missing_files(*r, images);
    if (m.empty()) out << "\u25a0 " << r->title << " image required files complete\n";
    missing.insert(missing.end(), m.begin(), m.end());
  }
  if (!missing.empty()) {
    throw Exception(Code::kNotFound, "Missing required files:\n  " + join(missing, "\n  "),
                    "restore them from the gpulab repository (images/ in " + images.string() + ")");
  }
  out << "\n" << kRule << "\n\u25a0 All required files check passed!\n" << kRule << "\n";

  out << "\nStarting image build...\n" << kRule << "\n";
  std::vector<BuiltImage> built;
  for (const Recipe* r : chosen) {
    out << "Building " << r->title << " image...\n";
    fs::path ctx = fs::temp_directory_path() /
                   ("gpulab-build-" + r->vendor + "-" + std::to_string(::getpid()) + ".tar");
    Status st = write_build_context(*r, images, ctx);
    if (!st.ok()) {
      fs::remove(ctx);
      throw Exception(st.error());
    }
    const std::string image = (opts.tag.empty() ? r->tag : opts.tag);
    docker::BuildSpec spec;
    spec.context_tar = ctx;
    spec.tags = {image.find(':') == std::string::npos ? image + ":latest" : image};
    if (!opts.base.empty()) spec.build_args["BASE"] = opts.base;
    spec.labels["org.gpulab.recipe"] = r->vendor;
    auto id = engine.build_image(spec, [&](const docker::Progress& p) {
      if (!opts.quiet_build && !p.stream.empty()) out << p.stream << std::flush;
    });
    fs::remove(ctx);
    if (!id.ok()) {
      throw Exception(Code::kInvalidArgument,
                      r->title + " image build failed: " + id.error().message,
                      "see the build output above");
    }
    BuiltImage b{r->vendor, image, *id, r->launch_command(image)};
    out << "\u25a0 " << r->title << " image built successfully: " << image << "\n"
        << "Launch command: " << b.launch_command << "\n";
    built.push_back(b);
  }
  out << "\n\u25a0 All images built successfully!\n";
  return built;
}

}  // namespace gpulab::builder
