// Runtime support of the toolkit's C++ artifacts: see tk_runtime.h.
#include "tk_runtime.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

#if defined(__unix__) || defined(__APPLE__)
#define TK_HAVE_MMAP 1
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace tk {

namespace {

uint64_t read_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint32_t read_u32(const unsigned char* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

[[noreturn]] void fail(const std::string& path, const std::string& what, const std::string& fix) {
  throw std::runtime_error(path + ": " + what + ". Fix: " + fix);
}

}  // namespace

Params::Params(const std::string& path, const char* model_hash, uint64_t expected_size) {
  const std::string regen = "use the .params file generated together with this code "
                            "(regenerate both with toolkit.generator.codegen)";
#ifdef TK_HAVE_MMAP
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail(path, "cannot open the parameters file", "check the path; " + regen);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail(path, "cannot stat the parameters file", regen);
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ >= kParamsHeader) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      data_ = static_cast<const unsigned char*>(p);
      mapped_ = true;
    }
  }
  ::close(fd);
#endif
  if (!mapped_) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(path, "cannot open the parameters file", "check the path; " + regen);
    in.seekg(0, std::ios::end);
    size_ = static_cast<size_t>(in.tellg());
    in.seekg(0, std::ios::beg);
    owned_.resize(size_ + 16);
    size_t shift = (16 - reinterpret_cast<uintptr_t>(owned_.data()) % 16) % 16;
    in.read(reinterpret_cast<char*>(owned_.data() + shift), static_cast<std::streamsize>(size_));
    data_ = owned_.data() + shift;
  }
  if (size_ < kParamsHeader || std::memcmp(data_, kParamsMagic, 8) != 0)
    fail(path, "not a toolkit parameters file (bad magic)", regen);
  const uint32_t version = read_u32(data_ + 8);
  if (version != kParamsVersion)
    fail(path, "parameters file format version " + std::to_string(version) +
                   ", this code reads version " + std::to_string(kParamsVersion), regen);
  const uint64_t declared = read_u64(data_ + 16);
  if (declared != size_ || size_ != expected_size)
    fail(path, "parameters file has " + std::to_string(size_) + " bytes (header says " +
                   std::to_string(declared) + "), the model expects " +
                   std::to_string(expected_size), regen);
  if (std::memcmp(data_ + 24, model_hash, 32) != 0)
    fail(path, "parameters file is for model " + std::string(reinterpret_cast<const char*>(data_ + 24), 32) +
                   ", this code is model " + std::string(model_hash, 32), regen);
}

Params::~Params() {
#ifdef TK_HAVE_MMAP
  if (mapped_) ::munmap(const_cast<unsigned char*>(data_), size_);
#endif
}

}  // namespace tk
