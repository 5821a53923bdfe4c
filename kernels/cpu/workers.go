package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
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

// spinPolls bounds how many times an idle worker polls for the next job,
// and a caller for its helpers' end, before it parks, and spinFor how long
// (whichever ends first; polls are slower under the race detector): a
// forward pass runs hundreds of short parallel loops, and waking a parked
// goroutine on another thread costs more than a decode step's loop (AMD
// EPYC Zen 5, 2 vCPUs, Q8_0 d=768, 2 threads: 252–349 decode tok/s
// parking at once, 411–480 polling up to 20 µs, 432–486 up to 100 µs;
// Intel Xeon family 6 model 207, 2 vCPUs, 2 threads, alternated, 20 µs
// against 100: Q4_K d=1536 GQA 79–83 → 86–99 tok/s, Q4_K d=768 609–670 →
// 649–688, F16 d=1536 GQA 29.4–31.1 → 30.2–31.9: spinFor is 100 µs).
// Between polls a worker yields (runtime.Gosched), so other goroutines
// run meanwhile; an idle pool stops polling within spinFor, so it takes
// little from other processes (the race-detector tests of engine/model:
// 22.6 s parking at once, 25.6 polling up to 20 µs, 26.4 polling 4,096
// times).
const (
	spinPolls = 1 << 12
	spinFor   = 100 * time.Microsecond
)

// spinning reports whether poll i of a wait that began at t0 may go on,
// yielding every 32 polls (when it also reads the clock).
func spinning(i int, t0 time.Time) bool {
	if i&31 != 31 {
		return i < spinPolls
	}
	runtime.Gosched()
	return i < spinPolls && time.Since(t0) < spinFor
}

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
	t0 := time.Now()
	for i := 0; spinning(i, t0); i++ {
		select {
		case j, ok := <-w.jobs:
			return j, ok
		default:
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
	t0 := time.Now()
	for i := 0; int(j.done.Load()) < helpers && spinning(i, t0); i++ {
	}
	j.wg.Wait()
}

func (w *workers) close() { w.once.Do(func() { close(w.jobs) }) }
