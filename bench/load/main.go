package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

type kind int

const (
	kGetTenant kind = iota
	kListGrants
	kPool
	kSetDemand
	nKinds
)

var kindNames = [nKinds]string{"GET /v1/tenants/{name}", "GET /v1/grants", "GET /v1/pool", "PUT /v1/tenants/{name}/demand"}

type stats struct {
	hist   [nKinds]*hdrhistogram.Histogram
	errors [nKinds]int64
	codes  map[int]int64
}

func newStats() *stats {
	s := &stats{codes: map[int]int64{}}
	for i := range s.hist {
		s.hist[i] = hdrhistogram.New(1, 10_000_000, 3) // µs
	}
	return s
}

func main() {
	server := flag.String("server", "http://127.0.0.1:8080", "control plane URL")
	token := flag.String("token", os.Getenv("GPUPOOL_TOKEN"), "operator token")
	duration := flag.Duration("duration", 20*time.Second, "how long to run")
	workers := flag.Int("workers", 32, "concurrent connections")
	writes := flag.Float64("writes", 0.2, "fraction of requests that change demand")
	tenants := flag.Int("tenants", 50, "tenants to create")
	rate := flag.Float64("rate", 0, "total requests per second (0: as fast as possible)")
	rssPID := flag.Int("pid", 0, "server process id: report its RSS every minute (Linux)")
	flag.Parse()
	if err := run(*server, *token, *duration, *workers, *writes, *tenants, *rate, *rssPID); err != nil {
		fmt.Fprintln(os.Stderr, "load: "+err.Error())
		os.Exit(1)
	}
}

func run(server, token string, d time.Duration, workers int, writes float64, nTenants int, rate float64, pid int) error {
	tr := &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	call := func(method, path string, body any) (int, error) {
		var rd io.Reader
		if body != nil {
			raw, _ := json.Marshal(body)
			rd = bytes.NewReader(raw)
		}
		req, _ := http.NewRequest(method, server+path, rd)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Setup: 4 nodes × 8 GPUs × 4 slices = 128 slices; tenants asking 1–4 replicas each.
	for n := range 4 {
		var gpus []map[string]any
		for g := range 8 {
			gpus = append(gpus, map[string]any{"uuid": fmt.Sprintf("GPU-%d-%d", n, g), "board": "H100-SXM5-80GB",
				"slices": []string{"1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"}})
		}
		if code, err := call("PUT", fmt.Sprintf("/v1/nodes/load-%d", n), map[string]any{"gpus": gpus}); err != nil || code != 200 {
			return fmt.Errorf("register node load-%d: status %d, %v", n, code, err)
		}
	}
	for i := range nTenants {
		if code, err := call("PUT", fmt.Sprintf("/v1/tenants/lt%02d", i), map[string]any{"demand": 1 + i%4}); err != nil || code != 200 {
			return fmt.Errorf("create tenant lt%02d: status %d, %v", i, code, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var pace chan struct{}
	if rate > 0 {
		pace = make(chan struct{}, workers*4)
		go feed(ctx, pace, rate)
	}
	if pid > 0 {
		go reportRSS(ctx, pid)
	}
	all := make([]*stats, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		s := newStats()
		all[w] = s
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for ctx.Err() == nil {
				if pace != nil {
					select {
					case <-pace:
					case <-ctx.Done():
						return
					}
				}
				k := kind(rng.IntN(3))
				if rng.Float64() < writes {
					k = kSetDemand
				}
				name := fmt.Sprintf("lt%02d", rng.IntN(nTenants))
				t0 := time.Now()
				var code int
				var err error
				switch k {
				case kGetTenant:
					code, err = call("GET", "/v1/tenants/"+name, nil)
				case kListGrants:
					code, err = call("GET", "/v1/grants", nil)
				case kPool:
					code, err = call("GET", "/v1/pool", nil)
				case kSetDemand:
					code, err = call("PUT", "/v1/tenants/"+name+"/demand", map[string]int{"replicas": rng.IntN(5)})
				}
				if ctx.Err() != nil && err != nil {
					return // the deadline cut this request
				}
				s.hist[k].RecordValue(max(1, time.Since(t0).Microseconds()))
				s.codes[code]++
				if err != nil || code >= 300 {
					s.errors[k]++
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	report(all, elapsed, workers, writes, rate)
	return nil
}

func report(all []*stats, elapsed time.Duration, workers int, writes, rate float64) {
	tot := newStats()
	sum := hdrhistogram.New(1, 10_000_000, 3)
	for _, s := range all {
		for k := range nKinds {
			tot.hist[k].Merge(s.hist[k])
			tot.errors[k] += s.errors[k]
		}
		for c, n := range s.codes {
			tot.codes[c] += n
		}
	}
	for k := range nKinds {
		sum.Merge(tot.hist[k])
	}
	fmt.Printf("%d workers, %.0f%% demand writes, %s, rate %s\n\n", workers, 100*writes, elapsed.Round(time.Millisecond), map[bool]string{true: "unpaced", false: fmt.Sprint(rate, "/s")}[rate == 0])
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "request\trequests\treq/s\terrors\tp50 ms\tp90 ms\tp99 ms\tmax ms\t")
	row := func(name string, h *hdrhistogram.Histogram, errs int64) {
		ms := func(q float64) string { return fmt.Sprintf("%.2f", float64(h.ValueAtQuantile(q))/1000) }
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%d\t%s\t%s\t%s\t%.2f\t\n", name, h.TotalCount(), float64(h.TotalCount())/elapsed.Seconds(), errs,
			ms(50), ms(90), ms(99), float64(h.Max())/1000)
	}
	var errs int64
	for k := range nKinds {
		row(kindNames[k], tot.hist[k], tot.errors[k])
		errs += tot.errors[k]
	}
	row("all", sum, errs)
	tw.Flush()
	var codes []string
	for c, n := range tot.codes {
		codes = append(codes, fmt.Sprintf("%d×%d", n, c))
	}
	fmt.Printf("\nstatus codes: %s\n", strings.Join(codes, " "))
}

func reportRSS(ctx context.Context, pid int) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err == nil {
			for _, l := range strings.Split(string(raw), "\n") {
				if strings.HasPrefix(l, "VmRSS:") {
					fmt.Fprintf(os.Stderr, "%s rss %s\n", time.Now().Format(time.TimeOnly), strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:")))
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// feed hands out rate tokens per second, catching up every millisecond; tokens the workers are
// too busy to take are dropped (the run then reports the rate it reached).
func feed(ctx context.Context, pace chan<- struct{}, rate float64) {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	start, sent := time.Now(), 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due := int(time.Since(start).Seconds() * rate)
		for sent < due {
			select {
			case pace <- struct{}{}:
				sent++
			default:
				sent = due
			}
		}
	}
}
