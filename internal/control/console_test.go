package control

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	v1 "gpupool.dev/gpupool/api/v1"
)

// findChromium returns a Chromium binary, or skips (fails in CI) when there is none.
func findChromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found: CI must install Debian's chromium package (see scripts/test.sh)")
	}
	t.Skip("chromium not found: install Debian's chromium package to run the console test in a real browser")
	return ""
}

func browser(t *testing.T) (context.Context, context.CancelFunc) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(findChromium(t)),
		chromedp.NoSandbox, chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	return ctx, func() { cancelT(); cancelB(); cancelA() }
}

// TestConsoleInBrowser: the console loads in headless Chromium, draws every slice of the pool,
// shows a demand change within 2 s, and a tenant's view holds only its own tenant.
func TestConsoleInBrowser(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.seedPool()
	ctx, cancel := browser(t)
	defer cancel()

	err := chromedp.Do(ctx,
		chromedp.Navigate(h.srv.URL+"/#token="+h.tokens["operator"]),
		chromedp.WaitVisible(`tr[data-tenant="bob"]`),
	)
	if err != nil {
		t.Fatal(err)
	}
	slices, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("[data-slice]").length`))
	if err != nil {
		t.Fatal(err)
	}
	tenants, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#tenants tbody tr").length`))
	if err != nil {
		t.Fatal(err)
	}
	if slices != 8 || tenants != 2 {
		t.Fatalf("console shows %d slices and %d tenants, want 8 and 2", slices, tenants)
	}

	// A gate operation asked through the API appears in the gate panel within 2 s.
	h.must("operator", "PUT", "/v1/nodes/n1/gpus/GPU-n1-0/layout", LayoutRequest{Layout: "7g.80gb@0"}, 200)
	asked := time.Now()
	for {
		row, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#gates tr[data-gate]')?.innerText ?? ""`))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(row, "GPU-n1-0") && strings.Contains(row, "7g.80gb@0") {
			break
		}
		if time.Since(asked) > 2*time.Second {
			t.Fatalf("gate operation not shown after 2s (panel row %q)", row)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A demand change made through the API appears in the page within 2 s.
	h.must("bob", "PUT", "/v1/tenants/bob/demand", ReplicasDemand(1), 200)
	changed := time.Now()
	for {
		// One expression: the page redraws every 500 ms, so a node found by one call may be gone
		// by the next.
		demand, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('tr[data-tenant="bob"] .demand')?.textContent ?? ""`))
		if err != nil {
			t.Fatal(err)
		}
		if demand == "1" {
			break
		}
		if time.Since(changed) > 2*time.Second {
			t.Fatalf("demand change not shown after 2s (page says %q)", demand)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("demand change shown after %s", time.Since(changed).Round(time.Millisecond))

	// A tenant user sees its own tenant only.
	tctx, tcancel := chromedp.NewContext(ctx)
	defer tcancel()
	err = chromedp.Do(tctx,
		chromedp.Navigate(h.srv.URL+"/#token="+h.tokens["alice"]),
		chromedp.WaitVisible(`tr[data-tenant="alice"]`),
		chromedp.Sleep(700*time.Millisecond), // one more refresh with events
	)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := chromedp.Run(tctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#tenants tbody tr")].map(r => r.dataset.tenant).join(",")`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if rows != "alice" {
		t.Fatalf("alice's console lists tenants %q, want only alice", rows)
	}
	if strings.Contains(body, "bob") {
		t.Fatalf("alice's console mentions bob:\n%s", body)
	}
	if !strings.Contains(body, "(other)") {
		t.Errorf("alice's console does not show other tenants' slices as occupied")
	}

	// An applied plan whose Pool has policy.cost: alice's row shows her cost per hour. One
	// exclusive H100 at 2 EUR/h, offered 1 req/s of the 2 its replica sustains (load 0.5): she
	// reserves the whole GPU (chargeback 2 EUR/h of hardware) and uses half of it (showback 1),
	// and her active energy is 0.5 × (700 − 105) W = 297.5 W, 0.2975 kWh an hour at 0.25 EUR
	// (0.074 EUR) and 400 gCO2e/kWh (119 g). Bob is not in the plan: dashes.
	pool := &v1.Pool{Metadata: v1.Metadata{Name: "p1"},
		Tenants: []v1.Tenant{{Name: "alice", Traffic: v1.Traffic{RPS: 1, InputTokens: 100, OutputTokens: 100}}},
		Policy: v1.Policy{Cost: &v1.CostPolicy{Currency: "EUR",
			Boards:          []v1.BoardCost{{Board: "H100-SXM5-80GB", HourlyPrice: ptrTo(2.0), Source: "test"}},
			EnergyPrice:     &v1.SourcedValue{Value: 0.25, Source: "test"},
			CarbonIntensity: &v1.CarbonIntensity{LocationBased: &v1.SourcedValue{Value: 400, Source: "test"}}}}}
	plan := &v1.Plan{Pool: "p1",
		GPUs:    []v1.PlanGPU{{Node: "n2", Index: 1, Board: "H100-SXM5-80GB", Mode: v1.ModeExclusive, Replicas: []v1.PlanReplica{{Tenant: "alice"}}}},
		Tenants: []v1.PlanTenant{{Name: "alice", Predicted: v1.Prediction{MaxRPS: 2}}}}
	if _, err := h.loop.Do(context.Background(), func(e *Engine, now time.Time) (any, error) { return e.ApplyPlan(now, pool, plan) }); err != nil {
		t.Fatal(err)
	}
	applied := time.Now()
	for {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`["alice", "bob"].map(n => [...document.querySelectorAll('tr[data-tenant="' + n + '"] .chargeback, tr[data-tenant="' + n + '"] .showback, tr[data-tenant="' + n + '"] .carbon')].map(c => c.textContent).join("|")).join(" / ")`))
		if err != nil {
			t.Fatal(err)
		}
		if got == "2.07 EUR|1.07 EUR|119 / —|—|—" {
			break
		}
		if time.Since(applied) > 2*time.Second {
			t.Fatalf("cost not shown after 2s: %q", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ptrTo[T any](v T) *T { return &v }
