package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
)

// The agent remembers, by GPU, the control plane's operation for which it turned MIG mode on, in
// StateDir/migmode.json (written and fsynced, as the journal and the cordon file are, before the
// mode is turned on). A GPU that ran whole and whose change then failed is rolled back to no
// instance in MIG mode; the agent turns the mode off again, and after a restart between the
// rollback and the mode change the file still says that the mode was its own doing.
const modeFileName = "migmode.json"

// modeFile returns the file's path, or "" without a state directory (memory only).
func (a *Agent) modeFile() string {
	if a.Config.StateDir == "" {
		return ""
	}
	return filepath.Join(a.Config.StateDir, modeFileName)
}

// loadModeOnLocked reads the file once, the first time the agent needs it (a.mu held). A file
// that does not parse is logged and read as empty: the mode of its GPUs is then left as it is.
func (a *Agent) loadModeOnLocked() {
	if a.modeLoaded {
		return
	}
	a.modeLoaded = true
	if a.modeOnFor == nil {
		a.modeOnFor = map[string]uint64{}
	}
	p := a.modeFile()
	if p == "" {
		return
	}
	raw, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	m := map[string]uint64{}
	if err == nil {
		err = json.Unmarshal(raw, &m)
	}
	if err != nil {
		a.Log.Warn("MIG mode file unreadable: the mode of the GPUs it names is left as it is", "file", p, "err", err)
		return
	}
	maps.Copy(a.modeOnFor, m)
}

// saveModeOnLocked writes the map (a.mu held): a temporary file, fsynced, renamed over the old
// one, and the directory fsynced.
func (a *Agent) saveModeOnLocked() error {
	p := a.modeFile()
	if p == "" {
		return nil
	}
	data, _ := json.Marshal(a.modeOnFor)
	tmp := p + ".tmp"
	if err := writeSync(tmp, data); err != nil {
		return fmt.Errorf("write MIG mode file %s: %w", p, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("write MIG mode file %s: %w", p, err)
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("write MIG mode file %s: %w", p, err)
	}
	return nil
}

// rememberModeOn records, before the agent turns MIG mode on, the operation it does it for.
func (a *Agent) rememberModeOn(uuid string, op uint64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.loadModeOnLocked()
	if old, ok := a.modeOnFor[uuid]; ok && old == op {
		return nil
	}
	a.modeOnFor[uuid] = op
	return a.saveModeOnLocked()
}

// forgetModeOn drops GPUs from the record (their mode is off again, or serves instances).
func (a *Agent) forgetModeOn(uuids ...string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.loadModeOnLocked()
	n := len(a.modeOnFor)
	for _, u := range uuids {
		delete(a.modeOnFor, u)
	}
	if len(a.modeOnFor) == n {
		return nil
	}
	return a.saveModeOnLocked()
}
