package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestClientTokenNotInHelp: a token given by GPUPOOL_TOKEN is used by the client commands but
// never printed by their --help (it used to be shown as the --token flag's default).
func TestClientTokenNotInHelp(t *testing.T) {
	const secret = "gp_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	t.Setenv("GPUPOOL_TOKEN", secret)
	for _, args := range [][]string{{"tenant", "--help"}, {"tenant", "set", "--help"}, {"gate", "--help"}, {"apply", "--help"}, {"token", "--help"}, {"token", "list", "--help"}, {"token", "revoke", "--help"}, {"node", "--help"}, {"grants", "--help"}} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, &out, &errOut); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if strings.Contains(out.String()+errOut.String(), secret) {
			t.Errorf("%v prints the token of GPUPOOL_TOKEN:\n%s", args, out.String())
		}
	}
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("[]"))
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"tenant", "list", "--server", srv.URL}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if got != "Bearer "+secret {
		t.Errorf("tenant list sent Authorization %q, want the token of GPUPOOL_TOKEN", got)
	}
	if err := run(context.Background(), []string{"tenant", "list", "--server", srv.URL, "--token", "gp_flag"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if got != "Bearer gp_flag" {
		t.Errorf("tenant list --token gp_flag sent Authorization %q", got)
	}
}
