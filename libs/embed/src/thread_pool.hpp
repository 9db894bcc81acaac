// A fork-join pool for the encoder: run(n, fn) calls fn(task, worker) for every task, then returns.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace awp::embed::detail {

class thread_pool {
public:
    /// `threads` workers in all: the calling thread plus threads - 1 pool threads.
    explicit thread_pool(int threads);
    ~thread_pool();
    thread_pool(const thread_pool&) = delete;
    thread_pool& operator=(const thread_pool&) = delete;

    int size() const { return static_cast<int>(workers_.size()) + 1; }
    /// Tasks are handed out one at a time (dynamic schedule); the first exception is rethrown.
    /// Not reentrant: one run() at a time (the encoder holds its mutex around it).
    void run(int tasks, const std::function<void(int task, int worker)>& fn);

private:
    void work(int worker);
    void worker_loop(int worker);

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable start_;
    std::condition_variable done_;
    std::uint64_t generation_ = 0;
    int busy_ = 0;
    bool stop_ = false;
    const std::function<void(int, int)>* fn_ = nullptr;
    int tasks_ = 0;
    std::atomic<int> next_{0};
    std::exception_ptr failure_;
};

}  // namespace awp::embed::detail
