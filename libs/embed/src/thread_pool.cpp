// A fork-join pool for the encoder: run(n, fn) calls fn(task, worker) for every task, then returns.
#include "thread_pool.hpp"

#include <algorithm>
#include <utility>

namespace awp::embed::detail {

thread_pool::thread_pool(int threads) {
    const int extra = std::max(threads, 1) - 1;
    workers_.reserve(static_cast<std::size_t>(extra));
    for (int i = 0; i < extra; ++i) workers_.emplace_back([this, i] { worker_loop(i + 1); });
}

thread_pool::~thread_pool() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    start_.notify_all();
    for (auto& t : workers_) t.join();
}

void thread_pool::work(int worker) {
    for (int task = next_.fetch_add(1); task < tasks_; task = next_.fetch_add(1)) {
        try {
            (*fn_)(task, worker);
        } catch (...) {
            std::lock_guard lock(mutex_);
            if (!failure_) failure_ = std::current_exception();
            next_.store(tasks_);  // stop handing out tasks
        }
    }
}

void thread_pool::worker_loop(int worker) {
    std::uint64_t seen = 0;
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            start_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
        }
        work(worker);
        {
            std::lock_guard lock(mutex_);
            --busy_;
        }
        done_.notify_one();
    }
}

void thread_pool::run(int tasks, const std::function<void(int, int)>& fn) {
    if (tasks <= 0) return;
    if (workers_.empty() || tasks == 1) {
        for (int t = 0; t < tasks; ++t) fn(t, 0);
        return;
    }
    {
        std::lock_guard lock(mutex_);
        fn_ = &fn;
        tasks_ = tasks;
        next_.store(0);
        failure_ = nullptr;
        busy_ = static_cast<int>(workers_.size());
        ++generation_;
    }
    start_.notify_all();
    work(0);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return busy_ == 0; });
    fn_ = nullptr;
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

}  // namespace awp::embed::detail
