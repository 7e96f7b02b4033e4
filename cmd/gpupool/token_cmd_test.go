package main

import (
	"encoding/json"
	"strings"
	"testing"

	"gpupool.dev/gpupool/internal/control"
)

// TestTokenListRevoke: `token list` shows every token's id, principal and creation time without
// its secret and marks the token file's; `token revoke ID` revokes one, after which its requests
// are 401; an unknown id is exit 1 with a 404 naming it; the caller's own token and the token
// file's are refused (exit 1, 409) and keep working.
func TestTokenListRevoke(t *testing.T) {
	url, op := startInProcess(t)
	as := func(token string, args ...string) (string, string, int) {
		return runCmd(t, append(args, "--server", url, "--token", token)...)
	}
	mint := func(args ...string) string {
		out, errs, code := as(op, append([]string{"token", "create"}, args...)...)
		if code != 0 || !strings.HasPrefix(out, "gp_") {
			t.Fatalf("token create %v: %d %q %q", args, code, out, errs)
		}
		return strings.TrimSpace(out)
	}
	chat, op2 := mint("tenant", "chat"), mint("operator")
	chatID, fileID := control.TokenID(control.HashToken(chat)), control.TokenID(control.HashToken(op))

	out, errs, code := as(op, "token", "list")
	if code != 0 {
		t.Fatalf("token list: %d %q", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("token list: %q, want a header and 3 tokens", out)
	}
	if !strings.Contains(lines[1], fileID) || !strings.Contains(lines[1], "(token file)") {
		t.Errorf("token list's first row %q, want the token file's operator token %s, marked", lines[1], fileID)
	}
	if f := strings.Fields(lines[2]); len(f) != 5 || f[0] != chatID || f[1] != "tenant" || f[2] != "chat" {
		t.Errorf("token list's second row %q, want %s tenant chat", lines[2], chatID)
	}
	for _, s := range []string{op, chat, op2} {
		if strings.Contains(out, s) || strings.Contains(out, control.HashToken(s)) {
			t.Errorf("token list shows a secret or a hash: %q", out)
		}
	}
	out, _, _ = as(op, "token", "list", "--json")
	var ts []control.TokenInfo
	if err := json.Unmarshal([]byte(out), &ts); err != nil || len(ts) != 3 || ts[1].ID != chatID || ts[1].Created.IsZero() {
		t.Fatalf("token list --json: %v %q", err, out)
	}

	if _, errs, code := as(chat, "tenant", "get", "chat"); strings.Contains(errs, "401") {
		t.Fatalf("the chat token before revoke: %d %q", code, errs)
	}
	if out, errs, code := as(op, "token", "revoke", chatID); code != 0 || !strings.Contains(out, "token "+chatID+" revoked (tenant chat") {
		t.Fatalf("token revoke: %d %q %q", code, out, errs)
	}
	if _, errs, code := as(chat, "tenant", "get", "chat"); code != exitInvalid || !strings.Contains(errs, "401") {
		t.Errorf("the revoked token: exit %d %q, want 1 and a 401", code, errs)
	}
	if _, errs, code := as(op, "token", "revoke", chatID); code != exitInvalid || !strings.Contains(errs, "404") || !strings.Contains(errs, chatID) {
		t.Errorf("revoke of a revoked token: exit %d %q, want 1 and a 404 naming the id", code, errs)
	}
	if _, errs, code := as(op, "token", "revoke", fileID); code != exitInvalid || !strings.Contains(errs, "409") || !strings.Contains(errs, "authenticated with") {
		t.Errorf("revoking the caller's own token: exit %d %q, want 1 and a 409", code, errs)
	}
	if _, errs, code := as(op2, "token", "revoke", fileID); code != exitInvalid || !strings.Contains(errs, "409") || !strings.Contains(errs, "token file") {
		t.Errorf("revoking the token file's token: exit %d %q, want 1 and a 409", code, errs)
	}
	if out, errs, code := as(op, "token", "list"); code != 0 || strings.Contains(out, chatID) || strings.Count(strings.TrimSpace(out), "\n") != 2 {
		t.Errorf("token list after revoke: %d %q %q, want the two operator tokens", code, out, errs)
	}
}
