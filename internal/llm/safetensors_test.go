package llm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// llamaTensors names a dense GQA model's weights as Hugging Face Llama checkpoints do.
func llamaTensors(a Arch, dtype string) []Tensor {
	h, hd := int64(a.Hidden), int64(a.HeadDimension())
	q, kv, in, v := int64(a.Heads)*hd, int64(a.KVHeads)*hd, int64(a.Intermediate), int64(a.Vocab)
	ts := []Tensor{{Name: "model.embed_tokens.weight", DType: dtype, Shape: []int64{v, h}}}
	for i := 0; i < a.Layers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		ts = append(ts,
			Tensor{Name: p + "self_attn.q_proj.weight", DType: dtype, Shape: []int64{q, h}},
			Tensor{Name: p + "self_attn.k_proj.weight", DType: dtype, Shape: []int64{kv, h}},
			Tensor{Name: p + "self_attn.v_proj.weight", DType: dtype, Shape: []int64{kv, h}},
			Tensor{Name: p + "self_attn.o_proj.weight", DType: dtype, Shape: []int64{h, q}},
			Tensor{Name: p + "mlp.gate_proj.weight", DType: dtype, Shape: []int64{in, h}},
			Tensor{Name: p + "mlp.up_proj.weight", DType: dtype, Shape: []int64{in, h}},
			Tensor{Name: p + "mlp.down_proj.weight", DType: dtype, Shape: []int64{h, in}},
			Tensor{Name: p + "input_layernorm.weight", DType: dtype, Shape: []int64{h}},
			Tensor{Name: p + "post_attention_layernorm.weight", DType: dtype, Shape: []int64{h}},
		)
	}
	ts = append(ts, Tensor{Name: "model.norm.weight", DType: dtype, Shape: []int64{h}})
	if !a.TiedEmbeddings {
		ts = append(ts, Tensor{Name: "lm_head.weight", DType: dtype, Shape: []int64{v, h}})
	}
	return ts
}

func mustEncode(t testing.TB, ts []Tensor, meta map[string]string) []byte {
	t.Helper()
	b, err := EncodeHeader(ts, meta)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawFile builds a safetensors file from a literal header JSON and a data length.
func rawFile(header string, data int) []byte {
	b := make([]byte, 8, 8+len(header)+data)
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	return append(append(b, header...), make([]byte, data)...)
}

func TestReadHeaderRoundTrip(t *testing.T) {
	ts := []Tensor{
		{Name: "a", DType: "BF16", Shape: []int64{2, 3}},   // 12 bytes
		{Name: "b", DType: "F32", Shape: []int64{4}},       // 16 bytes
		{Name: "c", DType: "I32", Shape: []int64{2, 2}},    // 16 bytes
		{Name: "d", DType: "F8_E4M3", Shape: []int64{5}},   // 5 bytes
		{Name: "e", DType: "F4", Shape: []int64{2, 3}},     // 6 × 4 bits = 3 bytes
		{Name: "s", DType: "F32", Shape: []int64{}},        // scalar: 4 bytes
		{Name: "z", DType: "BF16", Shape: []int64{0, 128}}, // empty: 0 bytes
	}
	file := mustEncode(t, ts, map[string]string{"format": "pt"})
	h, err := ParseHeader(file)
	if err != nil {
		t.Fatal(err)
	}
	if h.DataBytes != 12+16+16+5+3+4 || h.Metadata["format"] != "pt" || len(h.Tensors) != len(ts) {
		t.Fatalf("header = %+v", h)
	}
	if h.HeaderBytes%8 != 0 || int64(len(file)) != 8+h.HeaderBytes+h.DataBytes {
		t.Errorf("lengths: header %d data %d file %d", h.HeaderBytes, h.DataBytes, len(file))
	}
	want := map[string]DTypeStat{
		"BF16": {DType: "BF16", Tensors: 2, Elements: 6, Bytes: 12},
		"F32":  {DType: "F32", Tensors: 2, Elements: 5, Bytes: 20},
		"I32":  {DType: "I32", Tensors: 1, Elements: 4, Bytes: 16},
		"F4":   {DType: "F4", Tensors: 1, Elements: 6, Bytes: 3},
	}
	for _, s := range h.ByDType() {
		if w, ok := want[s.DType]; ok && s != w {
			t.Errorf("ByDType %s = %+v, want %+v", s.DType, s, w)
		}
	}
}

// boundedReader fails any read past limit: proof that ReadHeader never touches tensor data.
type boundedReader struct {
	r     io.ReaderAt
	limit int64
}

func (b boundedReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > b.limit {
		return 0, errors.New("read past the header")
	}
	return b.r.ReadAt(p, off)
}

func TestReadHeaderReadsOnlyTheHeader(t *testing.T) {
	file := mustEncode(t, llamaTensors(tinyArch(), "BF16"), nil)
	n := int64(binary.LittleEndian.Uint64(file))
	h, err := ReadHeader(boundedReader{bytes.NewReader(file), 8 + n}, int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Tensors) != 2*9+3 {
		t.Errorf("%d tensors", len(h.Tensors))
	}
}

func TestReadHeaderRejectsHostileFiles(t *testing.T) {
	huge := make([]byte, 8)
	binary.LittleEndian.PutUint64(huge, 1<<62)
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "shorter than the 8-byte"},
		{"absurd length", append(huge, '{', '}'), "exceeds the 100000000-byte limit"},
		{"length past file", rawFile("{}", 0)[:9], "runs past the end"},
		{"not an object", rawFile(`[1,2]`, 0), "does not start with '{'"},
		{"leading space", rawFile(` {}`, 0), "does not start with '{'"},
		{"bad json", rawFile(`{"a":`, 0), "not a JSON object"},
		{"bad utf8", rawFile("{\"\xff\":1}", 0), "not valid UTF-8"},
		{"unknown dtype", rawFile(`{"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}}`, 1), `unknown dtype "Q4"`},
		{"negative shape", rawFile(`{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}`, 1), "not a non-negative integer"},
		{"float shape", rawFile(`{"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}}`, 1), "not a non-negative integer"},
		{"overflowing shape", rawFile(`{"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,1]}}`, 1), "overflows"},
		{"overflowing bits", rawFile(`{"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,1]}}`, 1), "take"},
		{"one offset", rawFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0]}}`, 1), "has 1 values"},
		{"end before begin", rawFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[2,1]}}`, 2), "before begin"},
		{"past the file", rawFile(`{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}`, 4), "past the end of the 4-byte data section"},
		{"length mismatch", rawFile(`{"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}}`, 4), "span 4 bytes"},
		{"odd bits", rawFile(`{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,1]}}`, 1), "take 12 bits"},
		{"overlap", rawFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}`, 6), "overlaps"},
		{"hole", rawFile(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}}`, 6), "belong to no tensor"},
		{"trailing bytes", rawFile(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, 5), "3 bytes after the last tensor"},
		{"bad metadata", rawFile(`{"__metadata__":{"k":1}}`, 0), "__metadata__"},
		{"entry not object", rawFile(`{"a":3}`, 0), `tensor "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseHeader(tt.file)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q lacks %q", err, tt.want)
			}
		})
	}
}

func TestReadHeaderListsAllProblemsCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < 30; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"t%02d":{"dtype":"NOPE","shape":[1],"data_offsets":[0,1]}`, i)
	}
	b.WriteString("}")
	_, err := ParseHeader(rawFile(b.String(), 0))
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	if got := strings.Count(msg, "unknown dtype"); got != maxHeaderErrors {
		t.Errorf("%d problems listed, want %d", got, maxHeaderErrors)
	}
	if !strings.Contains(msg, "and 10 more problems") {
		t.Errorf("error does not count the rest: %s", msg)
	}
}

func TestReadHeaderEmptyHeaderObject(t *testing.T) {
	h, err := ParseHeader(rawFile(`{}      `, 0)) // padded with spaces, as writers do
	if err != nil || len(h.Tensors) != 0 {
		t.Errorf("ParseHeader({}) = %+v, %v", h, err)
	}
}
