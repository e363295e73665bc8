/* tilecert: a host emulation of the CUDA execution model.
 *
 * Emitted CUDA sources compile unchanged with  g++ -std=c++20 -pthread -include tc_cuda_emu.h -x c++
 *
 * - A launch runs the threads of a block as real threads (std::thread, one per CUDA thread);
 *   the blocks of the grid run one after another on the same threads.
 * - __shared__ variables have static storage, so the threads of the running block share them.
 * - __syncthreads() and __syncwarp() are real barriers among the threads of the block / of the
 *   32-thread warp. A barrier that cannot be passed is reported, naming the threads:
 *     divergence: every thread of the block (warp) has arrived at a barrier or exited the kernel,
 *                 but some exited, or they wait at different barriers (source lines);
 *     deadlock:   every thread waits, and no barrier can complete (block and warp barriers
 *                 waiting on each other);
 *     timeout:    no thread arrived at or left a barrier for TC_EMU_BARRIER_TIMEOUT_MS
 *                 milliseconds (default 60000) while some thread never arrived.
 *   The launch then fails: cudaGetLastError() returns cudaErrorTcBarrier and
 *   cudaGetErrorString() the report. No thread runs past a barrier its block did not pass
 *   (it abandons the block), and the remaining blocks are not run.
 * - cp.async (the emitted tc_cp_async / tc_cp_async_commit / tc_cp_async_wait) is a copy that completes
 *   only at a wait: an issued copy reads its source and waits, pending, in its thread's open group;
 *   commit_group closes that group; wait_group(n) lands the thread's groups but the newest n, oldest first
 *   (the landing writes happen there, on the issuing thread). A read of a cell whose copy is pending sees
 *   its old content, so a missing wait gives a wrong value; with ThreadSanitizer a missing barrier after
 *   the wait is a race between the landing write and another thread's read. Copies still pending when a
 *   block ends never land.
 * - Device memory is host memory (cudaMemcpy is memcpy); atomics are std::atomic_ref.
 * - Launches are synchronous. Launch geometry is checked against the CUDA limits.
 */
#ifndef TC_CUDA_EMU_H
#define TC_CUDA_EMU_H
#define TC_CUDA_EMULATION 1

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline
#define TC_LAUNCH(kernel, grid, block, ...) tc_emu::launch((grid), (block), [&] { kernel(__VA_ARGS__); })
#define __syncthreads() tc_emu::sync(tc_emu::Wait::block, __LINE__)
#define __syncwarp() tc_emu::sync(tc_emu::Wait::warp, __LINE__)

struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorTcBarrier = 10001, /* not a CUDA code: a barrier the threads of a block could not pass */
};
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };

inline thread_local uint3 threadIdx, blockIdx;
inline thread_local dim3 blockDim, gridDim;

namespace tc_emu {

enum class Wait { running, block, warp, done };

/* Thrown out of a barrier after a barrier failure: the thread abandons the block (so no thread
 * runs past a barrier the block did not pass). */
struct Abandon {};

inline std::chrono::milliseconds timeout() {
    static const long ms = [] {
        const char *text = std::getenv("TC_EMU_BARRIER_TIMEOUT_MS");
        long v = text ? std::strtol(text, nullptr, 10) : 0;
        return v > 0 ? v : 60000L;
    }();
    return std::chrono::milliseconds(ms);
}

/* A thread's own wake-up: threads leave a barrier through their own slot, never through a lock
 * all of them take, so the barrier orders what came before it and nothing else (the accesses of
 * two threads after a barrier stay unordered, which is what ThreadSanitizer must see). */
struct Slot {
    std::mutex m;
    std::condition_variable cv;
    bool go = false, stop = false;
};

/* The threads of one block, their barrier states, and the report of a barrier they could not pass. */
struct Team {
    Team(dim3 grid_, dim3 block_)
        : grid(grid_), dim(block_), n(block_.x * block_.y * block_.z), slots(new Slot[n]), state(n, Wait::running),
          line(n, 0) {}

    dim3 grid, dim;
    unsigned n;
    std::unique_ptr<Slot[]> slots;
    std::mutex m; /* guards everything below */
    std::vector<Wait> state;
    std::vector<int> line;
    unsigned long progress = 0;
    unsigned finished = 0;
    bool aborted = false, failed = false;
    std::string report;

    std::string who(unsigned k) const {
        return "(" + std::to_string(k % dim.x) + "," + std::to_string(k / dim.x % dim.y) + "," +
               std::to_string(k / (dim.x * dim.y)) + ")";
    }

    /* "; 4 threads (0,0,0) (1,0,0) (2,0,0) (3,0,0) <what>" for the threads of [lo, hi) matching. */
    template <class Pred> std::string group(unsigned lo, unsigned hi, Pred match, const std::string &what) const {
        std::string names;
        unsigned count = 0;
        for (unsigned k = lo; k < hi; ++k)
            if (match(k)) {
                if (count < 8) names += " " + who(k);
                ++count;
            }
        if (count > 8) names += " ...";
        return "; " + std::to_string(count) + (count == 1 ? " thread" : " threads") + names + " " + what;
    }

    /* One group per distinct (state, barrier line) among threads [lo, hi). */
    std::string describe(unsigned lo, unsigned hi) const {
        std::string out;
        std::vector<std::pair<Wait, int>> seen;
        for (unsigned k = lo; k < hi; ++k) {
            bool waits = state[k] == Wait::block || state[k] == Wait::warp;
            std::pair<Wait, int> key(state[k], waits ? line[k] : 0);
            bool known = false;
            for (auto &s : seen) known = known || s == key;
            if (known) continue;
            seen.push_back(key);
            std::string what = key.first == Wait::block  ? "waiting at __syncthreads() on line " + std::to_string(key.second)
                               : key.first == Wait::warp ? "waiting at __syncwarp() on line " + std::to_string(key.second)
                               : key.first == Wait::done ? "exited the kernel without reaching it"
                                                         : "still running, never arrived";
            out += group(lo, hi, [&](unsigned j) { return state[j] == key.first && (!waits || line[j] == key.second); },
                         what);
        }
        return out;
    }

    void wake(unsigned k, bool stop = false) {
        std::lock_guard<std::mutex> lk(slots[k].m);
        slots[k].go = true;
        slots[k].stop = stop;
        slots[k].cv.notify_one();
    }

    /* Record the report and let every other waiting thread go (they return from their barriers). */
    void fail(const std::string &kind, unsigned lo, unsigned hi);

    bool same_line(unsigned lo, unsigned hi, Wait kind) const {
        int first = -1;
        for (unsigned k = lo; k < hi; ++k)
            if (state[k] == kind) {
                if (first >= 0 && line[k] != first) return false;
                first = line[k];
            }
        return true;
    }

    /* Let [lo, hi) pass their barrier; ``me`` is the calling thread (it does not wait). */
    void release(unsigned lo, unsigned hi, unsigned me, bool &passed) {
        for (unsigned k = lo; k < hi; ++k) {
            state[k] = Wait::running;
            if (k == me)
                passed = true;
            else
                wake(k);
        }
    }

    /* Pass every barrier whose participants have all arrived; report one that cannot be passed. */
    void settle(unsigned me, bool &passed) {
        unsigned at_block = 0, done = 0, running = 0;
        for (Wait s : state) {
            at_block += s == Wait::block;
            done += s == Wait::done;
            running += s == Wait::running;
        }
        bool released = false;
        if (at_block > 0 && at_block + done == n) {
            if (done > 0 || !same_line(0, n, Wait::block)) return fail("barrier divergence", 0, n);
            release(0, n, me, passed);
            released = true;
        }
        for (unsigned lo = 0; lo < n; lo += 32) {
            unsigned hi = lo + 32 < n ? lo + 32 : n, at_warp = 0, out = 0;
            for (unsigned k = lo; k < hi; ++k) {
                at_warp += state[k] == Wait::warp;
                out += state[k] == Wait::done;
            }
            if (at_warp == 0 || at_warp + out < hi - lo) continue;
            if (out > 0 || !same_line(lo, hi, Wait::warp)) return fail("warp barrier divergence", lo, hi);
            release(lo, hi, me, passed);
            released = true;
        }
        if (released)
            ++progress;
        else if (running == 0 && done < n)
            fail("barrier deadlock", 0, n);
    }

    /* Wait until woken (true: stop: abandon the barrier, or run no more blocks). A barrier wait
     * (``timed``) that sees no progress since ``seen`` for a whole timeout reports the barrier as
     * never reached. */
    bool await(unsigned k, bool timed, unsigned long seen = 0) {
        std::unique_lock<std::mutex> lk(slots[k].m);
        while (!slots[k].go) {
            if (!timed) {
                slots[k].cv.wait(lk);
                continue;
            }
            if (slots[k].cv.wait_for(lk, timeout()) == std::cv_status::no_timeout || slots[k].go) continue;
            lk.unlock();
            bool gave_up;
            {
                std::lock_guard<std::mutex> team_lock(m);
                if (!failed && progress == seen)
                    fail("barrier timeout (no progress for " + std::to_string(timeout().count()) + " ms)", 0, n);
                seen = progress;
                gave_up = failed;
            }
            lk.lock();
            if (gave_up) {
                slots[k].go = false;
                return true;
            }
        }
        slots[k].go = false;
        return slots[k].stop;
    }

    /* Thread k ended the kernel for the current block; true when the next block is to run. */
    bool finish(unsigned k) {
        {
            std::lock_guard<std::mutex> lk(m);
            state[k] = Wait::done;
            ++progress;
            bool passed = false;
            if (!failed) settle(k, passed);
            if (++finished == n) {
                finished = 0;
                for (unsigned j = 0; j < n; ++j) {
                    state[j] = Wait::running;
                    if (j != k) wake(j, failed);
                }
                return !failed;
            }
        }
        return !await(k, false);
    }
};

inline thread_local Team *team = nullptr;
inline thread_local unsigned tid = 0;

inline void Team::fail(const std::string &kind, unsigned lo, unsigned hi) {
    report = kind + " in block (" + std::to_string(blockIdx.x) + "," + std::to_string(blockIdx.y) + "," +
             std::to_string(blockIdx.z) + ")" + describe(lo, hi);
    failed = true;
    for (unsigned k = 0; k < n; ++k)
        if (k != tid && (state[k] == Wait::block || state[k] == Wait::warp)) wake(k, true);
}

inline void sync(Wait kind, int line) {
    Team &t = *team;
    bool passed = false;
    unsigned long seen;
    {
        std::lock_guard<std::mutex> lk(t.m);
        if (t.failed) throw Abandon{};
        t.state[tid] = kind;
        t.line[tid] = line;
        seen = ++t.progress;
        t.settle(tid, passed);
        if (passed) return;
        if (t.failed) throw Abandon{};
    }
    if (t.await(tid, true, seen)) throw Abandon{};
}

/* cp.async: one pending copy (its source's bytes, read at issue), a thread's open group and its committed ones. */
struct PendingCopy {
    void *dst;
    unsigned char bytes[16];
    int n;
};
struct AsyncCopies {
    std::vector<PendingCopy> open;
    std::deque<std::vector<PendingCopy>> groups;
};
inline thread_local AsyncCopies async_copies;

inline void cp_async(void *dst, const void *src, int n, bool valid) {
    PendingCopy c{dst, {}, n};
    if (valid) std::memcpy(c.bytes, src, (size_t)n); /* else the zero-fill form: n zero bytes, nothing read */
    async_copies.open.push_back(c);
}
inline void cp_async_commit() {
    async_copies.groups.push_back(std::move(async_copies.open));
    async_copies.open.clear();
}
inline void cp_async_wait(int n) {
    while (async_copies.groups.size() > (size_t)n) {
        for (const PendingCopy &c : async_copies.groups.front()) std::memcpy(c.dst, c.bytes, (size_t)c.n);
        async_copies.groups.pop_front();
    }
}

inline cudaError_t &last_error() {
    static cudaError_t e = cudaSuccess;
    return e;
}
inline std::string &last_report() {
    static std::string r;
    return r;
}
inline cudaError_t set_error(cudaError_t e, const std::string &report) {
    last_error() = e;
    last_report() = report;
    return e;
}

template <class Body> void launch(dim3 grid, dim3 block, Body body) {
    unsigned long long threads = 1ull * block.x * block.y * block.z;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 || block.x > 1024 ||
        block.y > 1024 || block.z > 64 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
        set_error(cudaErrorInvalidConfiguration,
                  "invalid launch configuration: grid (" + std::to_string(grid.x) + "," + std::to_string(grid.y) +
                      "," + std::to_string(grid.z) + "), block (" + std::to_string(block.x) + "," +
                      std::to_string(block.y) + "," + std::to_string(block.z) + ")");
        return;
    }
    Team t(grid, block);
    std::vector<std::thread> workers;
    auto work = [&t, &body, grid, block](unsigned k) {
        team = &t;
        tid = k;
        threadIdx = uint3{k % block.x, k / block.x % block.y, k / (block.x * block.y)};
        blockDim = block;
        gridDim = grid;
        if (t.await(k, false)) return;
        for (unsigned z = 0; z < grid.z; ++z)
            for (unsigned y = 0; y < grid.y; ++y)
                for (unsigned x = 0; x < grid.x; ++x) {
                    blockIdx = uint3{x, y, z};
                    async_copies = AsyncCopies{};
                    try {
                        body();
                    } catch (const Abandon &) {
                    }
                    if (!t.finish(k)) return;
                }
    };
    try {
        for (unsigned k = 0; k < t.n; ++k) workers.emplace_back(work, k);
    } catch (const std::system_error &) {
        t.aborted = true;
    }
    for (unsigned k = 0; k < workers.size(); ++k) t.wake(k, t.aborted);
    for (std::thread &w : workers) w.join();
    if (t.aborted)
        set_error(cudaErrorLaunchOutOfResources, "cannot start " + std::to_string(t.n) + " threads for one block");
    else if (t.failed)
        set_error(cudaErrorTcBarrier, t.report);
}

} // namespace tc_emu

inline cudaError_t cudaGetLastError() {
    cudaError_t e = tc_emu::last_error();
    tc_emu::last_error() = cudaSuccess;
    return e;
}
inline cudaError_t cudaDeviceSynchronize() { return tc_emu::last_error(); }
inline const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidValue: return "invalid argument";
    default: return tc_emu::last_report().c_str();
    }
}
inline cudaError_t cudaMalloc(void **p, size_t bytes) {
    *p = std::malloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : tc_emu::set_error(cudaErrorMemoryAllocation, "out of memory");
}
inline cudaError_t cudaFree(void *p) {
    std::free(p);
    return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind) {
    if (bytes) std::memcpy(dst, src, bytes);
    return cudaSuccess;
}
inline cudaError_t cudaMemset(void *p, int value, size_t bytes) {
    if (bytes) std::memset(p, value, bytes);
    return cudaSuccess;
}

inline unsigned atomicCAS(unsigned *p, unsigned expected, unsigned desired) {
    std::atomic_ref<unsigned>(*p).compare_exchange_strong(expected, desired);
    return expected;
}
inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long expected, unsigned long long desired) {
    std::atomic_ref<unsigned long long>(*p).compare_exchange_strong(expected, desired);
    return expected;
}
inline int atomicExch(int *p, int value) { return std::atomic_ref<int>(*p).exchange(value); }

#endif
