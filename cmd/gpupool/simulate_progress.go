package main

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress draws a progress bar of simulated time on a terminal, once a run has taken longer
// than progressDelay of wall time; on anything else it draws nothing.
type progress struct {
	w     io.Writer
	start time.Time
	bar   *progressbar.ProgressBar
}

const progressDelay = 2 * time.Second

// newProgress returns nil unless w is a terminal.
func newProgress(w io.Writer, _ time.Duration) *progress {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return &progress{w: w, start: time.Now()}
}

// update is called by the simulator with the simulated time reached.
func (p *progress) update(now, end time.Duration) {
	if p.bar == nil {
		if time.Since(p.start) < progressDelay {
			return
		}
		p.bar = progressbar.NewOptions64(int64(end/time.Second),
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription("simulating"),
			progressbar.OptionSetItsString("sim s"),
			progressbar.OptionShowIts(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish())
	}
	_ = p.bar.Set64(int64(now / time.Second))
}

// finish clears the bar; a nil progress does nothing.
func (p *progress) finish() {
	if p != nil && p.bar != nil {
		_ = p.bar.Finish()
	}
}
