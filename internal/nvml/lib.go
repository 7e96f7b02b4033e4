package nvml

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrTimeout is returned (wrapped) when an NVML call does not return within Options.Timeout.
var ErrTimeout = errors.New("nvml call timed out")

// Error is an NVML call that returned something other than SUCCESS.
type Error struct {
	Call   string // the NVML call, e.g. "DeviceCreateGpuInstanceWithPlacement"
	Return gonvml.Return
}

func (e *Error) Error() string { return e.Call + ": " + gonvml.ErrorString(e.Return) }

// Fault is what a test injects at one call: an error, a hang, or both (a hang that, when
// released, fails).
type Fault struct {
	Err  bool
	Hang bool
}

// Options configure a Lib.
type Options struct {
	// Timeout bounds every NVML call; 0 means 5 s.
	Timeout time.Duration
	// Faults, when set, is consulted before every call by name.
	Faults func(call string) Fault
}

// Lib is gpupool's view of NVML. It is safe for concurrent use.
type Lib struct {
	n       gonvml.Interface
	opt     Options
	release chan struct{}
	once    sync.Once
	stuck   atomic.Int64

	gmu     sync.Mutex
	gpmPrev map[string]gonvml.GpmSample // the last GPM sample of each MIG instance (gpm.go)
}

// New wraps n. Call Init before use and Close after.
func New(n gonvml.Interface, opt Options) *Lib {
	if opt.Timeout <= 0 {
		opt.Timeout = 5 * time.Second
	}
	return &Lib{n: n, opt: opt, release: make(chan struct{})}
}

// NewReal wraps the system's NVML library (libnvidia-ml.so.1, loaded at Init).
func NewReal(opt Options) *Lib { return New(gonvml.New(), opt) }

// Init initialises NVML.
func (l *Lib) Init() error {
	return l.do("Init", func() gonvml.Return { return l.n.Init() })
}

// Close shuts NVML down and releases injected hangs.
func (l *Lib) Close() error {
	l.once.Do(func() { close(l.release) })
	return l.do("Shutdown", func() gonvml.Return { return l.n.Shutdown() })
}

// Stuck returns how many calls timed out and may still be running inside NVML.
func (l *Lib) Stuck() int64 { return l.stuck.Load() }

// do runs one NVML call through the fault injector; with a fault injected, the call runs on its
// own goroutine bounded by the timeout.
func (l *Lib) do(call string, f func() gonvml.Return) error { return l.run(call, f, false) }

// doBounded is do for calls that can hang for real (event waits, MIG changes): it always runs the
// call on its own goroutine so that Timeout holds even without an injected fault.
func (l *Lib) doBounded(call string, f func() gonvml.Return) error { return l.run(call, f, true) }

func (l *Lib) run(call string, f func() gonvml.Return, bounded bool) error {
	var fault Fault
	if l.opt.Faults != nil {
		fault = l.opt.Faults(call)
	}
	if !fault.Hang && !fault.Err && !bounded {
		return check(call, f())
	}
	done := make(chan gonvml.Return, 1)
	go func() {
		if fault.Hang {
			<-l.release
		}
		if fault.Err {
			done <- gonvml.ERROR_UNKNOWN
			return
		}
		done <- f()
	}()
	t := time.NewTimer(l.opt.Timeout)
	defer t.Stop()
	select {
	case r := <-done:
		return check(call, r)
	case <-t.C:
		l.stuck.Add(1)
		return fmt.Errorf("%s after %s: %w", call, l.opt.Timeout, ErrTimeout)
	}
}

func check(call string, r gonvml.Return) error {
	if r == gonvml.SUCCESS {
		return nil
	}
	return &Error{Call: call, Return: r}
}

// IsNotSupported reports whether err is NVML's Not Supported.
func IsNotSupported(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Return == gonvml.ERROR_NOT_SUPPORTED
}

// device returns the handle of the GPU with the UUID.
func (l *Lib) device(uuid string) (gonvml.Device, error) {
	var d gonvml.Device
	err := l.do("DeviceGetHandleByUUID", func() (r gonvml.Return) { d, r = l.n.DeviceGetHandleByUUID(uuid); return })
	if err != nil {
		return nil, fmt.Errorf("get device %s: %w", uuid, err)
	}
	return d, nil
}
