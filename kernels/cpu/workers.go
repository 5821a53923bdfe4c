package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// workers is a fixed pool of goroutines that run parallel loops. A loop is
// split into tasks; workers (and the calling goroutine, which always takes
// part, so a loop finishes even when every worker is busy with another
// caller's loop) take the next task index from an atomic counter. Which
// goroutine runs a task never changes what the task computes: every output
// element is owned by exactly one task, so results do not depend on the
// number of threads.
type workers struct {
	n    int
	jobs chan *job
	once sync.Once
}

type job struct {
	tasks int
	fn    func(task int)
	next  atomic.Int64
	done  atomic.Int32 // helpers finished
	wg    sync.WaitGroup
}

// spinPolls is how many times an idle worker polls for the next job, and a
// caller for its helpers' end, before it parks (tens of microseconds): a
// forward pass runs hundreds of short parallel loops, and waking a parked
// goroutine on another thread costs more than a decode step's loop
// (AMD EPYC Zen 5, 2 vCPUs: 2-thread decode was slower than 1-thread
// with every hand-off parked). Between polls a worker yields
// (runtime.Gosched), so other goroutines run meanwhile.
const spinPolls = 1 << 12

func newWorkers(n int) *workers {
	w := &workers{n: n, jobs: make(chan *job, 4*n)}
	for i := 1; i < n; i++ { // the caller is the n-th thread
		go func() {
			for {
				j, ok := w.next()
				if !ok {
					return
				}
				j.work()
				j.done.Add(1)
				j.wg.Done()
			}
		}()
	}
	return w
}

// next returns the next job, polling before it parks; false once the pool
// is closed.
func (w *workers) next() (*job, bool) {
	for i := range spinPolls {
		select {
		case j, ok := <-w.jobs:
			return j, ok
		default:
		}
		if i&31 == 31 {
			runtime.Gosched()
		}
	}
	j, ok := <-w.jobs
	return j, ok
}

func (j *job) work() {
	for {
		t := int(j.next.Add(1) - 1)
		if t >= j.tasks {
			return
		}
		j.fn(t)
	}
}

// run calls fn(t) for every t in [0, tasks), in parallel, and returns when
// all calls have returned.
func (w *workers) run(tasks int, fn func(task int)) {
	if tasks <= 0 {
		return
	}
	helpers := min(w.n-1, tasks-1)
	if helpers <= 0 {
		for t := range tasks {
			fn(t)
		}
		return
	}
	j := &job{tasks: tasks, fn: fn}
	j.wg.Add(helpers)
	for range helpers {
		w.jobs <- j
	}
	j.work()
	for i := 0; i < spinPolls && int(j.done.Load()) < helpers; i++ {
		if i&31 == 31 {
			runtime.Gosched()
		}
	}
	j.wg.Wait()
}

func (w *workers) close() { w.once.Do(func() { close(w.jobs) }) }
