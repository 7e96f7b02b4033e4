package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Files of a Hugging Face PEFT adapter folder.
const (
	AdapterConfigFile  = "adapter_config.json"
	AdapterWeightsFile = "adapter_model.safetensors"
	// MaxAdapterConfigBytes bounds adapter_config.json; real ones are under 2 KiB.
	MaxAdapterConfigBytes = 1 << 20
	// MaxLoRARank is the largest rank vLLM accepts (its --max-lora-rank choices end at 512).
	MaxLoRARank = 512
	// maxTargetModules bounds target_modules; a model has a handful of linear layer names.
	maxTargetModules = 64
)

// LoRARanks are the values vLLM accepts for --max-lora-rank (vllm/config/lora.py, MaxLoRARanks).
var LoRARanks = []int{1, 8, 16, 32, 64, 128, 256, 320, 512}

// AdapterConfig is what vLLM reads from adapter_config.json (vllm/lora/peft_helper.py).
type AdapterConfig struct {
	PEFTType  string  `json:"peftType"`
	Rank      int     `json:"rank"`
	Alpha     float64 `json:"alpha"`
	BaseModel string  `json:"baseModel,omitempty"`
	// TargetModules are the module names the adapter changes; TargetRegex is set instead when
	// target_modules is a regular expression (PEFT accepts both).
	TargetModules []string `json:"targetModules,omitempty"`
	TargetRegex   string   `json:"targetRegex,omitempty"`
	// RankPattern overrides the rank per module (PEFT's rank_pattern); MaxRank is the largest
	// rank any module has, what --max-lora-rank must cover.
	RankPattern map[string]int `json:"rankPattern,omitempty"`
	MaxRank     int            `json:"maxRank"`
	UseRSLoRA   bool           `json:"useRsLora,omitempty"`
}

// Adapter is a PEFT LoRA adapter folder as its config and safetensors header describe it.
type Adapter struct {
	Config AdapterConfig `json:"config"`
	// Bytes is the tensor data of adapter_model.safetensors: what one copy of the adapter takes
	// in host memory (vLLM's CPU LRU cache) and what loading it copies to the GPU.
	Bytes   int64       `json:"bytes"`
	Tensors int         `json:"tensors"`
	ByDType []DTypeStat `json:"byDtype"`
	// Modules are the distinct module names that carry lora_A/lora_B tensors (q_proj, …).
	Modules []string `json:"modules"`
	Notes   []string `json:"notes,omitempty"`
}

// rawAdapterConfig is adapter_config.json as PEFT writes it; fields are raw so that every
// problem can be reported with its field name.
type rawAdapterConfig struct {
	PEFTType      json.RawMessage `json:"peft_type"`
	R             json.RawMessage `json:"r"`
	Alpha         json.RawMessage `json:"lora_alpha"`
	TargetModules json.RawMessage `json:"target_modules"`
	BaseModel     json.RawMessage `json:"base_model_name_or_path"`
	RankPattern   json.RawMessage `json:"rank_pattern"`
	ModulesToSave json.RawMessage `json:"modules_to_save"`
	UseDoRA       json.RawMessage `json:"use_dora"`
	UseRSLoRA     json.RawMessage `json:"use_rslora"`
}

// ParseAdapterConfig reads adapter_config.json. It reports every problem at once, each under the
// JSON field it concerns, and refuses what vLLM refuses (modules_to_save, DoRA) and what it
// cannot serve (a rank above 512). Errors never quote the file's content beyond field names.
func ParseAdapterConfig(data []byte) (AdapterConfig, error) {
	if len(data) > MaxAdapterConfigBytes {
		return AdapterConfig{}, fmt.Errorf("parse %s: %d bytes exceeds the %d-byte limit", AdapterConfigFile, len(data), MaxAdapterConfigBytes)
	}
	var raw rawAdapterConfig
	if err := json.Unmarshal(data, &raw); err != nil {
		return AdapterConfig{}, fmt.Errorf("parse %s: %w", AdapterConfigFile, jsonProblem(err))
	}
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{field}, a...)...))
	}
	var c AdapterConfig
	if s, ok := rawString(raw.PEFTType); !isNull(raw.PEFTType) && (!ok || s != "LORA") {
		bad("peft_type", "must be \"LORA\" (only LoRA adapters are served)")
	} else {
		c.PEFTType = "LORA"
	}
	c.Rank = rawInt(raw.R, "r", 1, MaxLoRARank, true, bad)
	c.MaxRank = c.Rank
	if isNull(raw.Alpha) {
		bad("lora_alpha", "is required")
	} else if err := json.Unmarshal(raw.Alpha, &c.Alpha); err != nil || !(c.Alpha > 0) || math.IsInf(c.Alpha, 0) {
		bad("lora_alpha", "must be a positive number")
	}
	c.TargetModules, c.TargetRegex = targetModules(raw.TargetModules, bad)
	if !isNull(raw.BaseModel) {
		if s, ok := rawString(raw.BaseModel); !ok || len(s) > 256 || !utf8Printable(s) {
			bad("base_model_name_or_path", "must be a printable string of at most 256 bytes")
		} else {
			c.BaseModel = s
		}
	}
	c.RankPattern, c.MaxRank = rankPattern(raw.RankPattern, c.MaxRank, bad)
	if !isNull(raw.ModulesToSave) && !bytes.Equal(bytes.TrimSpace(raw.ModulesToSave), []byte("[]")) {
		bad("modules_to_save", "must be null: vLLM serves adapters whose extra modules are none")
	}
	if b := rawBool(raw.UseDoRA, "use_dora", bad); b {
		bad("use_dora", "DoRA adapters are not served by vLLM")
	}
	c.UseRSLoRA = rawBool(raw.UseRSLoRA, "use_rslora", bad)
	if len(errs) > 0 {
		return AdapterConfig{}, fmt.Errorf("parse %s: %w", AdapterConfigFile, errors.Join(errs...))
	}
	return c, nil
}

// targetModules reads target_modules: a list of module names or one regular expression.
func targetModules(msg json.RawMessage, bad func(string, string, ...any)) ([]string, string) {
	if isNull(msg) {
		bad("target_modules", "is required")
		return nil, ""
	}
	if s, ok := rawString(msg); ok {
		if len(s) > 1024 || !utf8Printable(s) {
			bad("target_modules", "must be a printable regular expression of at most 1024 bytes")
			return nil, ""
		}
		if _, err := regexp.Compile(s); err != nil {
			bad("target_modules", "is not a valid regular expression")
			return nil, ""
		}
		return nil, s
	}
	var list []string
	if err := json.Unmarshal(msg, &list); err != nil {
		bad("target_modules", "must be a list of module names or a regular expression")
		return nil, ""
	}
	if len(list) == 0 || len(list) > maxTargetModules {
		bad("target_modules", "must list 1 to %d module names (got %d)", maxTargetModules, len(list))
		return nil, ""
	}
	for i, m := range list {
		if !isModuleName(m) {
			bad(fmt.Sprintf("target_modules[%d]", i), "must be a module name of letters, digits, '_' and '.' (at most 128 bytes)")
			return nil, ""
		}
	}
	sort.Strings(list)
	return compactStrings(list), ""
}

// rankPattern reads PEFT's rank_pattern (module name or pattern → rank) and returns the largest
// rank, which is what the engine's slot size must cover.
func rankPattern(msg json.RawMessage, rank int, bad func(string, string, ...any)) (map[string]int, int) {
	if isNull(msg) {
		return nil, rank
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		bad("rank_pattern", "must be an object of module name to rank")
		return nil, rank
	}
	if len(m) > maxTargetModules*4 {
		bad("rank_pattern", "has %d entries, more than %d", len(m), maxTargetModules*4)
		return nil, rank
	}
	out := map[string]int{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if len(k) > 256 || !utf8Printable(k) {
			bad("rank_pattern", "has a key that is not a printable string of at most 256 bytes")
			continue
		}
		r := rawInt(m[k], fmt.Sprintf("rank_pattern[%q]", k), 1, MaxLoRARank, true, bad)
		if r > 0 {
			out[k] = r
			rank = max(rank, r)
		}
	}
	if len(out) == 0 {
		return nil, rank
	}
	return out, rank
}

// LoadAdapterDir reads a PEFT adapter folder through fsys: adapter_config.json (required) and the
// header of adapter_model.safetensors (required; never its tensor data). It applies the model
// directory's rules: regular files only, each within its limit, no path out of fsys. The header
// must agree with the config: every lora_A tensor's rank dimension within the config's largest
// rank, every module in it a target (when target_modules is a list).
func LoadAdapterDir(fsys fs.FS) (Adapter, error) {
	b, err := readSmall(fsys, AdapterConfigFile, MaxAdapterConfigBytes)
	if err != nil {
		return Adapter{}, err
	}
	cfg, err := ParseAdapterConfig(b)
	if err != nil {
		return Adapter{}, err
	}
	h, err := readHeaderFile(fsys, AdapterWeightsFile)
	if err != nil {
		return Adapter{}, err
	}
	a := Adapter{Config: cfg, Tensors: len(h.Tensors), ByDType: h.ByDType()}
	if err := a.fromHeader(h); err != nil {
		return Adapter{}, fmt.Errorf("%s: %w", AdapterWeightsFile, err)
	}
	return a, nil
}

// loraTensor matches PEFT's tensor names: base_model.model.<path>.<module>.lora_{A,B}.weight.
var loraTensor = regexp.MustCompile(`^(.*\.)?([A-Za-z0-9_]+)\.lora_(A|B|embedding_A|embedding_B)(\.[A-Za-z0-9_]+)?\.weight$`)

// fromHeader checks the tensors against the config and fills Bytes and Modules.
func (a *Adapter) fromHeader(h *Header) error {
	if len(h.Tensors) == 0 {
		return errors.New("tensors: none: an adapter has lora_A and lora_B weights")
	}
	var errs []error
	mods := map[string]bool{}
	var total int64
	for _, t := range h.Tensors {
		var ok bool
		if total, ok = addChecked(total, t.Bytes()); !ok {
			return errors.New("tensors: byte total overflows")
		}
		m := loraTensor.FindStringSubmatch(t.Name)
		if m == nil {
			errs = append(errs, fmt.Errorf("tensors[%q]: not a LoRA weight (want <module>.lora_A.weight or <module>.lora_B.weight)", clipName(t.Name)))
			continue
		}
		mods[m[2]] = true
		if len(t.Shape) != 2 {
			errs = append(errs, fmt.Errorf("tensors[%q].shape: must have 2 dimensions (got %d)", clipName(t.Name), len(t.Shape)))
			continue
		}
		r := t.Shape[0] // lora_A is rank × in
		if m[3] == "B" {
			r = t.Shape[1] // lora_B is out × rank
		}
		if m[3] == "A" || m[3] == "B" {
			if r < 1 || r > int64(a.Config.MaxRank) {
				errs = append(errs, fmt.Errorf("tensors[%q].shape: rank %d is outside 1..%d, the config's largest rank", clipName(t.Name), r, a.Config.MaxRank))
			}
		}
		if len(errs) >= maxHeaderErrors {
			break
		}
	}
	a.Bytes = total
	a.Modules = slices.Sorted(maps.Keys(mods))
	if list := a.Config.TargetModules; len(list) > 0 {
		for _, m := range a.Modules {
			if !targets(list, m) {
				errs = append(errs, fmt.Errorf("tensors: module %q is not in %s's target_modules", clipName(m), AdapterConfigFile))
			}
		}
	}
	for _, m := range a.Modules {
		if m == "lm_head" || m == "embed_tokens" {
			a.Notes = append(a.Notes, fmt.Sprintf("the adapter changes %s: vLLM serves LoRA on linear layers inside the decoder; check that the engine version accepts it", m))
		}
	}
	return joinCapped(errs)
}

// targets says whether module m is one of list's names (PEFT matches a name by suffix).
func targets(list []string, m string) bool {
	for _, t := range list {
		if t == m || strings.HasSuffix(t, "."+m) {
			return true
		}
	}
	return false
}

func isNull(msg json.RawMessage) bool {
	s := bytes.TrimSpace(msg)
	return len(s) == 0 || bytes.Equal(s, []byte("null"))
}

func rawString(msg json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(msg, &s) != nil {
		return "", false
	}
	return s, true
}

// rawInt reads a whole number in [lo, hi]; JSON numbers like 16.0 are accepted, 16.5 is not.
func rawInt(msg json.RawMessage, field string, lo, hi int, required bool, bad func(string, string, ...any)) int {
	if isNull(msg) {
		if required {
			bad(field, "is required")
		}
		return 0
	}
	var f float64
	if err := json.Unmarshal(msg, &f); err != nil || f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		bad(field, "must be a whole number between %d and %d", lo, hi)
		return 0
	}
	return int(f)
}

func rawBool(msg json.RawMessage, field string, bad func(string, string, ...any)) bool {
	if isNull(msg) {
		return false
	}
	var b bool
	if json.Unmarshal(msg, &b) != nil {
		bad(field, "must be true or false")
		return false
	}
	return b
}

// isModuleName accepts PEFT module names (q_proj, model.layers.0.self_attn.q_proj).
func isModuleName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '.' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func utf8Printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return false
		}
	}
	return true
}

// clipName bounds a name taken from a file before it goes into an error.
func clipName(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}
