package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gpupool.dev/gpupool/internal/agent"
)

// A damaged gate journal (a byte flipped inside a record with good records after it) stops the
// agent with an error that names the file, says the last good state is unknown and names the way
// out; --reset then keeps the damaged journal under a new name, starts a new one and uncordons the
// node, and the agent runs again. Before, --reset failed on the same error as the agent.
func TestAgentDamagedJournal(t *testing.T) {
	cfg := agentConfig(t)
	state := filepath.Join(filepath.Dir(cfg), "state")
	jpath := filepath.Join(state, "gate.journal")
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--once"}, &out, &errOut); err != nil {
		t.Fatalf("first run: %v\n%s", err, errOut.String())
	}
	data, err := os.ReadFile(jpath)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 1000 {
		t.Fatalf("journal has %d bytes, want several records", len(data))
	}
	data[200] ^= 0xff
	if err := os.WriteFile(jpath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// The node is left cordoned, as a change stopped half way would leave it.
	if err := (&agent.LocalNode{Path: filepath.Join(state, "cordon.json")}).Cordon(context.Background(), "change of GPU 0"); err != nil {
		t.Fatal(err)
	}

	out.Reset()
	err = run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--once"}, &out, &errOut)
	if err == nil {
		t.Fatal("agent started on a damaged journal")
	}
	for _, want := range []string{jpath, "journal corrupt", "last good state is unknown", "nvidia-smi mig -lgi",
		"gpupool agent --reset --config FILE", jpath + ".damaged-TIME"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if exitCode(err) != exitInvalid {
		t.Errorf("exit code %d, want %d", exitCode(err), exitInvalid)
	}

	out.Reset()
	if err := run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--reset"}, &out, &errOut); err != nil {
		t.Fatalf("--reset on a damaged journal: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "damaged journal kept as "+jpath+".damaged-") || !strings.Contains(out.String(), "cordoned false") {
		t.Fatalf("--reset output:\n%s", out.String())
	}
	aside, _ := filepath.Glob(jpath + ".damaged-*")
	if len(aside) != 1 {
		t.Fatalf("damaged journals kept: %q, want one", aside)
	}
	if kept, err := os.ReadFile(aside[0]); err != nil || !bytes.Equal(kept, data) {
		t.Fatalf("the damaged journal was not kept as it was (%d bytes, err %v)", len(kept), err)
	}
	f, err := os.Open(jpath)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = agent.ReadJournal(f)
	f.Close()
	if err != nil {
		t.Fatalf("new journal: %v", err)
	}
	if c, err := (&agent.LocalNode{Path: filepath.Join(state, "cordon.json")}).Read(); err != nil || c.Cordoned {
		t.Fatalf("cordon after --reset: %+v, %v", c, err)
	}

	out.Reset()
	if err := run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--once"}, &out, &errOut); err != nil {
		t.Fatalf("agent after --reset: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "gate: phase idle, cordoned false") {
		t.Fatalf("agent after --reset:\n%s", out.String())
	}
	// A second damage and reset keeps both damaged journals.
	data, _ = os.ReadFile(jpath)
	copy(data, "XXXX")
	os.WriteFile(jpath, data, 0o600)
	if err := run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--reset"}, &out, &errOut); err != nil {
		t.Fatalf("second --reset: %v", err)
	}
	if aside, _ = filepath.Glob(jpath + ".damaged-*"); len(aside) != 2 {
		t.Fatalf("damaged journals kept after a second reset: %q, want two", aside)
	}
}
