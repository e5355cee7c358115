// Runtime support of the toolkit's C++ artifacts: see tk_runtime.h.
#include "tk_runtime.h"

#include <algorithm>
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
    owned_.resize(size_ + 64);
    size_t shift = (64 - reinterpret_cast<uintptr_t>(owned_.data()) % 64) % 64;
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

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// how long a worker spins for the next part before it sleeps, and the main thread for the
// workers' parts before it yields its core: half a millisecond, longer than the gaps between
// the split ops of an inference (waking a sleeping worker costs tens of microseconds, more in
// a virtual machine: with 50 us, two threads ran small models slower than one)
constexpr int64_t kSpinNs = 500000;

}  // namespace

void Pool::set_threads(int n) {
  if (n < 1) n = 1;
  if (n == threads()) return;
  stop();
  stopping_.store(false);
  // each worker waits for the generation after this one (a worker starting late must not
  // take a task published before it ran as the one it waited for)
  const uint64_t seen = generation_.load();
  for (int i = 1; i < n; ++i) workers_.emplace_back([this, seen] { work(seen); });
}

void Pool::stop() {
  if (workers_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
}

void Pool::drain(uint64_t gen) {
  const uint64_t tag = (gen & 0xffffffffu) << 32;
  uint64_t t = ticket_.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t chunks = (t >> 16) & 0xffffu, next = t & 0xffffu;
    if ((t & ~uint64_t(0xffffffffu)) != tag || next >= chunks) return;
    // the chunk is this thread's once the ticket moves past it; the task's fields stay as
    // they are until every chunk of it is done
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
    const int c = static_cast<int>(chunks), k = static_cast<int>(next);
    task_(ctx_, bound(r0_, r1_, c, k), bound(r0_, r1_, c, k + 1));
    done_.fetch_add(1, std::memory_order_release);
    t = ticket_.load(std::memory_order_acquire);
  }
}

void Pool::run(int r0, int r1, Task task, void* ctx) {
  const int n = threads();
  const int chunks = std::min({r1 - r0, 4 * n, 0xffff});
  task_ = task;
  ctx_ = ctx;
  r0_ = r0;
  r1_ = r1;
  done_.store(0, std::memory_order_relaxed);
  const uint64_t gen = generation_.load() + 1;
  ticket_.store(((gen & 0xffffffffu) << 32) | (uint64_t(chunks) << 16), std::memory_order_release);
  generation_.store(gen);  // seq_cst: publishes the task; ordered before sleeping_'s read
  if (sleeping_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mutex_); }
    wake_.notify_all();
  }
  drain(gen);
  int64_t start = 0;
  for (int spin = 0; done_.load(std::memory_order_acquire) != chunks; ++spin) {
    if (spin < 256) {
      cpu_relax();
      continue;
    }
    if (start == 0) start = Tracer::now();
    if (Tracer::now() - start < kSpinNs) cpu_relax();
    else std::this_thread::yield();
  }
}

void Pool::work(uint64_t seen) {
  for (;;) {
    int64_t start = 0;
    for (int spin = 0; generation_.load(std::memory_order_acquire) == seen; ++spin) {
      if (spin < 256) {
        cpu_relax();
        continue;
      }
      if (start == 0) start = Tracer::now();
      if (Tracer::now() - start < kSpinNs) {
        cpu_relax();
        continue;
      }
      std::unique_lock<std::mutex> lock(mutex_);
      sleeping_.fetch_add(1);
      while (generation_.load() == seen) wake_.wait(lock);
      sleeping_.fetch_sub(1);
      break;
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load()) return;
    drain(seen);
  }
}

Params::~Params() {
#ifdef TK_HAVE_MMAP
  if (mapped_) ::munmap(const_cast<unsigned char*>(data_), size_);
#endif
}

}  // namespace tk
