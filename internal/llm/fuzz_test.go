package llm

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

func FuzzParseConfig(f *testing.F) {
	entries, err := os.ReadDir(filepath.Join("testdata", "configs"))
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".json" {
			f.Add(readConfig(f, e.Name()))
		}
	}
	f.Add([]byte(tinyConfig))
	f.Add([]byte(`{"text_config":{"num_hidden_layers":1}}`))
	f.Add([]byte(`{"num_hidden_layers":1e400}`))
	f.Add([]byte(`{"kv_lora_rank":1,"num_local_experts":3,"num_experts_per_tok":"2"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, _, err := ParseConfig(data)
		if err != nil {
			return
		}
		// Whatever parses is valid, and the memory model stays inside int64.
		if verr := a.Validate(); verr != nil {
			t.Fatalf("parsed but invalid: %v", verr)
		}
		total, active := a.Params()
		if total <= 0 || active <= 0 || active > total {
			t.Fatalf("params %d / %d for %+v", total, active, a)
		}
		for _, q := range Quantizations() {
			if b := a.WeightBytes(q); b <= 0 {
				t.Fatalf("WeightBytes(%s) = %d", q, b)
			}
		}
		if kv := a.KVBytesPerToken(2); kv <= 0 {
			t.Fatalf("KVBytesPerToken = %d", kv)
		}
	})
}

func FuzzReadHeader(f *testing.F) {
	tiny, err := os.ReadFile(filepath.Join("testdata", "tiny-llama", "model.safetensors"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tiny)
	f.Add(rawFile(`{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,1]}}`, 1))
	f.Add(rawFile(`{"__metadata__":{"format":"pt"},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, 2))
	f.Add(rawFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}`, 6))
	huge := make([]byte, 16)
	binary.LittleEndian.PutUint64(huge, 1<<63)
	f.Add(huge)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHeader(data)
		if err != nil {
			return
		}
		if 8+h.HeaderBytes+h.DataBytes != int64(len(data)) {
			t.Fatalf("lengths %d + %d + 8 ≠ %d", h.HeaderBytes, h.DataBytes, len(data))
		}
		end := int64(0)
		for _, tt := range h.Tensors {
			if tt.Begin != end || tt.End < tt.Begin {
				t.Fatalf("tensor %q at [%d, %d) after %d", tt.Name, tt.Begin, tt.End, end)
			}
			end = tt.End
		}
		if end != h.DataBytes {
			t.Fatalf("tensors end at %d of %d", end, h.DataBytes)
		}
		// The file size is part of the format: one byte more is a byte no tensor owns.
		if _, err := ReadHeader(bytes.NewReader(data), int64(len(data))+1); err == nil {
			t.Fatal("accepted a size one byte past the tensors")
		}
	})
}

func FuzzParseIndex(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":10},"weight_map":{"a":"model-00001-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"../x.safetensors"}}`))
	f.Add([]byte(`{"metadata":{"total_size":1e300},"weight_map":{"a":"b.safetensors"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		files, info, err := parseIndex(data)
		if err != nil {
			return
		}
		if len(files) == 0 || info.size < 0 {
			t.Fatalf("files %v size %d", files, info.size)
		}
	})
}
