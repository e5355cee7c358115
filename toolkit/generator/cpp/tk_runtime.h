// Runtime support of the toolkit's C++ artifacts: the parameters file and the event tracer.
#ifndef TK_RUNTIME_H_
#define TK_RUNTIME_H_

#include <cstddef>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace tk {

// ---------------------------------------------------------------- parameters file
// Layout (little-endian): magic "TKPARAMS" (8 bytes), format version (u32), header size
// (u32), file size (u64), model hash (32 ASCII hex digits), 8 reserved bytes; then the
// payload, every array at a 16-byte aligned offset from the start of the file.
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
  std::vector<unsigned char> owned_;  // 16-byte aligned copy when not memory-mapped
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
  void enable(size_t capacity) {
    ids_.assign(capacity, 0);
    begins_.assign(capacity, 0);
    ends_.assign(capacity, 0);
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
