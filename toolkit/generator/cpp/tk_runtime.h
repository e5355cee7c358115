// Runtime support of the toolkit's C++ artifacts: the parameters file and the event tracer.
#ifndef TK_RUNTIME_H_
#define TK_RUNTIME_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace tk {

// ---------------------------------------------------------------- parameters file
// Layout (little-endian): magic "TKPARAMS" (8 bytes), format version (u32), header size
// (u32), file size (u64), model hash (32 ASCII hex digits), 8 reserved bytes; then the
// payload, every array at a 64-byte (cache-line) aligned offset from the start of the file.
constexpr char kParamsMagic[9] = "TKPARAMS";
constexpr uint32_t kParamsVersion = 1;
constexpr size_t kParamsHeader = 64;

class Params {
 public:
  // Maps (or reads) the file and checks magic, version, size and model hash; throws
  // std::runtime_error naming the file and what does not match.
  Params(const std::string& path, const char* model_hash, uint64_t expected_size);
  ~Params();
  Params(const Params&) = delete;
  Params& operator=(const Params&) = delete;
  const unsigned char* data() const { return data_; }
  template <typename T>
  const T* at(uint64_t offset) const { return reinterpret_cast<const T*>(data_ + offset); }

 private:
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::vector<unsigned char> owned_;  // 64-byte aligned copy when not memory-mapped
};

// ---------------------------------------------------------------- tracer
// Events (id, begin, end) in a buffer allocated when tracing is enabled; when off, begin,
// end and step are one branch each. Times are steady_clock nanoseconds. The steps of one
// inference are chained: one clock reading ends a step and begins the next (step()), so a
// step costs one reading, not two.
class Tracer {
 public:
  static int64_t now() {  // steady_clock nanoseconds
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  // Records up to `capacity` events from now on (the buffers are kept when their size stays,
  // so tracing can be turned on and off around single calls at no allocation).
  void enable(size_t capacity) {
    if (capacity != ids_.size()) {
      ids_.assign(capacity, 0);
      begins_.assign(capacity, 0);
      ends_.assign(capacity, 0);
    }
    count_ = 0;
    dropped_ = 0;
    enabled_ = capacity > 0;
  }
  void disable() { enabled_ = false; }
  bool enabled() const { return enabled_; }
  int64_t begin() const { return enabled_ ? now() : 0; }
  void end(int32_t id, int64_t start) { (void)step(id, start); }
  // Ends the event `id` begun at `start` now; returns now, the next step's begin.
  int64_t step(int32_t id, int64_t start) {
    if (!enabled_) return 0;
    const int64_t t = now();
    if (count_ < ids_.size()) {
      ids_[count_] = id;
      begins_[count_] = start;
      ends_[count_] = t;
      ++count_;
    } else {
      ++dropped_;
    }
    return t;
  }
  void clear() { count_ = 0; dropped_ = 0; }
  size_t count() const { return count_; }
  size_t dropped() const { return dropped_; }
  const int32_t* ids() const { return ids_.data(); }
  const int64_t* begins() const { return begins_.data(); }
  const int64_t* ends() const { return ends_.data(); }

 private:
  bool enabled_ = false;
  size_t count_ = 0, dropped_ = 0;
  std::vector<int32_t> ids_;
  std::vector<int64_t> begins_, ends_;
};

// ---------------------------------------------------------------- model buffers
// An input or output buffer of a model: storage of its own, and the pointer the inference
// reads or writes (its own storage, or the caller's array for one borrowed inference).
template <typename T>
class Buffer {
 public:
  explicit Buffer(size_t count) : own_(count), p_(own_.data()) {}
  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return own_.size(); }
  void borrow(T* p) { p_ = p; }
  void restore() { p_ = own_.data(); }

 private:
  std::vector<T> own_;
  T* p_;
};

// ---------------------------------------------------------------- thread pool
// A pool of `threads() - 1` workers kept for the model's life; rows(r0, r1, f) cuts the rows
// [r0, r1) into contiguous chunks (up to 4 per thread) which the calling thread and the
// workers claim one at a time, and returns when every chunk is done: a worker the system
// has not scheduled yet leaves its chunks to the others instead of holding them up. Each
// output row is computed by one thread with the same code as on one thread, so results do
// not depend on the number of threads. Workers wait for work spinning for a short while,
// then sleeping on a condition variable.
class Pool {
 public:
  Pool() = default;
  ~Pool() { stop(); }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  // Starts n - 1 workers (n >= 1; the previous workers are stopped first).
  void set_threads(int n);
  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  template <typename F>
  void rows(int r0, int r1, F&& f) {
    if (workers_.empty() || r1 - r0 < 2) {
      f(r0, r1);
      return;
    }
    using Fn = typename std::remove_reference<F>::type;
    run(r0, r1, [](void* ctx, int a, int b) { (*static_cast<Fn*>(ctx))(a, b); },
        static_cast<void*>(&f));
  }

 private:
  using Task = void (*)(void*, int, int);
  void run(int r0, int r1, Task task, void* ctx);
  void work(uint64_t seen);
  // claims and runs the chunks of the task of generation `gen` until none is left
  void drain(uint64_t gen);
  void stop();
  // the part `index` of `parts` of [r0, r1)
  static int bound(int r0, int r1, int parts, int index) {
    return r0 + static_cast<int>(static_cast<int64_t>(r1 - r0) * index / parts);
  }
  std::vector<std::thread> workers_;
  Task task_ = nullptr;
  void* ctx_ = nullptr;
  int r0_ = 0, r1_ = 0;
  std::atomic<uint64_t> generation_{0};
  // the next chunk to claim: generation (high 32 bits), chunk count (16), next chunk (16)
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int> done_{0};
  std::atomic<int> sleeping_{0};
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
};

}  // namespace tk

#ifdef TK_TRACE_DISABLE
#define TK_BEGIN(tracer) int64_t tk_t0_ = 0
#define TK_END(tracer, id) (void)tk_t0_
#define TK_START(tracer) int64_t tk_t_ = 0
#define TK_STEP(tracer, id) (void)tk_t_
#else
#define TK_BEGIN(tracer) const int64_t tk_t0_ = (tracer).begin()
#define TK_END(tracer, id) (tracer).end((id), tk_t0_)
// chained steps of one inference: TK_START once, then TK_STEP after each step
#define TK_START(tracer) int64_t tk_t_ = (tracer).begin()
#define TK_STEP(tracer, id) tk_t_ = (tracer).step((id), tk_t_)
#endif

#endif  // TK_RUNTIME_H_
