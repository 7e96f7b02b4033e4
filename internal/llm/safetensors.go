package llm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"sort"
	"unicode/utf8"
)

// MaxHeaderBytes is the largest safetensors header accepted: 100 MB, the limit of the reference
// implementation (huggingface/safetensors, MAX_HEADER_SIZE).
const MaxHeaderBytes = 100_000_000

// maxHeaderErrors bounds how many tensor problems one error lists.
const maxHeaderErrors = 20

// dtypeBits is the width of every safetensors dtype (the reference implementation's Dtype enum).
var dtypeBits = map[string]int64{
	"BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8,
	"I16": 16, "U16": 16, "F16": 16, "BF16": 16,
	"I32": 32, "U32": 32, "F32": 32,
	"I64": 64, "U64": 64, "F64": 64, "C64": 64,
	"F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}

// Tensor is one entry of a safetensors header. Begin and End are byte offsets into the data
// section, which starts right after the header.
type Tensor struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
	Begin int64   `json:"begin"`
	End   int64   `json:"end"`
}

// Elements is the product of the shape (1 for a scalar).
func (t Tensor) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Bytes is the tensor's length in the data section.
func (t Tensor) Bytes() int64 { return t.End - t.Begin }

// Header is a parsed and validated safetensors header.
type Header struct {
	HeaderBytes int64             `json:"headerBytes"` // the JSON's length, N
	DataBytes   int64             `json:"dataBytes"`   // file size − 8 − N
	Tensors     []Tensor          `json:"tensors"`     // by Begin, then name
	Metadata    map[string]string `json:"metadata,omitempty"`
}

// DTypeStat totals the tensors of one dtype.
type DTypeStat struct {
	DType    string `json:"dtype"`
	Tensors  int    `json:"tensors"`
	Elements int64  `json:"elements"`
	Bytes    int64  `json:"bytes"`
}

// ByDType totals h's tensors per dtype, sorted by dtype name.
func (h *Header) ByDType() []DTypeStat { return byDType(h.Tensors) }

func byDType(ts []Tensor) []DTypeStat {
	m := map[string]*DTypeStat{}
	for _, t := range ts {
		s := m[t.DType]
		if s == nil {
			s = &DTypeStat{DType: t.DType}
			m[t.DType] = s
		}
		s.Tensors++
		s.Elements += t.Elements()
		s.Bytes += t.Bytes()
	}
	out := make([]DTypeStat, 0, len(m))
	for _, s := range m {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].DType < out[j].DType })
	return out
}

// ReadHeader reads and validates the header of a safetensors file of size bytes. It reads only
// the first 8 + N bytes, never the tensor data. It rejects, listing every problem: a header length
// over MaxHeaderBytes or past the end of the file, a header that is not UTF-8 JSON starting with
// '{', unknown dtypes, negative or overflowing shapes, offsets with end < begin or past the end of
// the file, a byte length that is not elements × dtype width, and — as the reference
// implementation does — overlapping tensors, holes between tensors and bytes after the last one.
func ReadHeader(r io.ReaderAt, size int64) (*Header, error) {
	if size < 8 {
		return nil, fmt.Errorf("read safetensors header: file is %d bytes, shorter than the 8-byte length prefix", size)
	}
	var prefix [8]byte
	if err := readFull(r, prefix[:], 0); err != nil {
		return nil, fmt.Errorf("read safetensors header: length prefix: %w", err)
	}
	n := binary.LittleEndian.Uint64(prefix[:])
	if n > MaxHeaderBytes {
		return nil, fmt.Errorf("read safetensors header: header length %d exceeds the %d-byte limit", n, MaxHeaderBytes)
	}
	if n > uint64(size-8) {
		return nil, fmt.Errorf("read safetensors header: header length %d runs past the end of the %d-byte file", n, size)
	}
	buf := make([]byte, n)
	if err := readFull(r, buf, 8); err != nil {
		return nil, fmt.Errorf("read safetensors header: %w", err)
	}
	h, err := parseHeaderJSON(buf, size-8-int64(n))
	if err != nil {
		return nil, fmt.Errorf("read safetensors header: %w", err)
	}
	return h, nil
}

// readFull reads len(p) bytes at off; io.EOF with a full read is success (io.ReaderAt allows it).
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// rawTensor is a header entry as written; numbers stay json.Number to catch negatives and floats.
type rawTensor struct {
	DType   string        `json:"dtype"`
	Shape   []json.Number `json:"shape"`
	Offsets []json.Number `json:"data_offsets"`
}

func parseHeaderJSON(buf []byte, dataBytes int64) (*Header, error) {
	if len(buf) == 0 || buf[0] != '{' {
		return nil, errors.New("header does not start with '{'")
	}
	if !utf8.Valid(buf) {
		return nil, errors.New("header is not valid UTF-8")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(buf, &raw); err != nil {
		return nil, fmt.Errorf("header is not a JSON object: %w", jsonProblem(err))
	}
	h := &Header{HeaderBytes: int64(len(buf)), DataBytes: dataBytes}
	var errs []error
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if name == "__metadata__" {
			if err := json.Unmarshal(raw[name], &h.Metadata); err != nil {
				errs = append(errs, fmt.Errorf("__metadata__: want a string-to-string map: %w", err))
			}
			continue
		}
		t, err := parseTensor(name, raw[name], dataBytes)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		h.Tensors = append(h.Tensors, t)
	}
	if len(errs) == 0 {
		errs = checkLayout(h.Tensors, dataBytes)
	}
	if len(errs) > 0 {
		return nil, joinCapped(errs)
	}
	return h, nil
}

// parseTensor validates one entry against the data section's length.
func parseTensor(name string, msg json.RawMessage, dataBytes int64) (Tensor, error) {
	var rt rawTensor
	if err := json.Unmarshal(msg, &rt); err != nil {
		return Tensor{}, fmt.Errorf("tensor %q: want {dtype, shape, data_offsets}: %w", name, err)
	}
	width, ok := dtypeBits[rt.DType]
	if !ok {
		return Tensor{}, fmt.Errorf("tensor %q: unknown dtype %q", name, rt.DType)
	}
	t := Tensor{Name: name, DType: rt.DType, Shape: make([]int64, len(rt.Shape))}
	elems := uint64(1)
	for i, d := range rt.Shape {
		v, err := d.Int64()
		if err != nil || v < 0 {
			return Tensor{}, fmt.Errorf("tensor %q: shape[%d] %s is not a non-negative integer", name, i, d)
		}
		t.Shape[i] = v
		hi, lo := bits.Mul64(elems, uint64(v))
		if hi != 0 || lo > math.MaxInt64 {
			return Tensor{}, fmt.Errorf("tensor %q: shape %v overflows", name, rt.Shape)
		}
		elems = lo
	}
	if len(rt.Offsets) != 2 {
		return Tensor{}, fmt.Errorf("tensor %q: data_offsets has %d values, want [begin, end]", name, len(rt.Offsets))
	}
	b, errB := rt.Offsets[0].Int64()
	e, errE := rt.Offsets[1].Int64()
	switch {
	case errB != nil || errE != nil || b < 0 || e < 0:
		return Tensor{}, fmt.Errorf("tensor %q: data_offsets %v are not non-negative integers", name, rt.Offsets)
	case e < b:
		return Tensor{}, fmt.Errorf("tensor %q: data_offsets end %d is before begin %d", name, e, b)
	case e > dataBytes:
		return Tensor{}, fmt.Errorf("tensor %q: data_offsets end %d is past the end of the %d-byte data section", name, e, dataBytes)
	}
	t.Begin, t.End = b, e
	hi, bitLen := bits.Mul64(elems, uint64(width))
	if hi != 0 || bitLen%8 != 0 || bitLen/8 != uint64(e-b) {
		return Tensor{}, fmt.Errorf("tensor %q: %d elements of %s take %d bits, but data_offsets span %d bytes",
			name, elems, rt.DType, bitLen, e-b)
	}
	return t, nil
}

// checkLayout sorts ts by offset and checks they tile the data section exactly.
func checkLayout(ts []Tensor, dataBytes int64) []error {
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].Begin != ts[j].Begin {
			return ts[i].Begin < ts[j].Begin
		}
		if ts[i].End != ts[j].End {
			return ts[i].End < ts[j].End
		}
		return ts[i].Name < ts[j].Name
	})
	var errs []error
	end, last := int64(0), ""
	for _, t := range ts {
		switch {
		case t.Begin < end:
			errs = append(errs, fmt.Errorf("tensor %q [%d, %d) overlaps tensor %q ending at %d", t.Name, t.Begin, t.End, last, end))
		case t.Begin > end:
			errs = append(errs, fmt.Errorf("bytes [%d, %d) before tensor %q belong to no tensor", end, t.Begin, t.Name))
		}
		if t.End > end {
			end, last = t.End, t.Name
		}
	}
	if end != dataBytes {
		errs = append(errs, fmt.Errorf("%d bytes after the last tensor belong to no tensor", dataBytes-end))
	}
	return errs
}

// joinCapped joins at most maxHeaderErrors errors and says how many were left out.
func joinCapped(errs []error) error {
	if len(errs) > maxHeaderErrors {
		more := len(errs) - maxHeaderErrors
		errs = append(errs[:maxHeaderErrors:maxHeaderErrors], fmt.Errorf("and %d more problems", more))
	}
	return errors.Join(errs...)
}

// ParseHeader validates the header of a whole safetensors file held in memory.
func ParseHeader(file []byte) (*Header, error) {
	return ReadHeader(bytes.NewReader(file), int64(len(file)))
}

// EncodeHeader builds the bytes of a safetensors file whose tensors are laid out back to back in
// the given order, with zero data. It is the inverse of ReadHeader for tests and fixtures.
func EncodeHeader(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	entries := map[string]any{}
	if metadata != nil {
		entries["__metadata__"] = metadata
	}
	var off int64
	for _, t := range tensors {
		width, ok := dtypeBits[t.DType]
		if !ok {
			return nil, fmt.Errorf("encode safetensors header: tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		n := t.Elements() * width / 8
		entries[t.Name] = map[string]any{"dtype": t.DType, "shape": shape, "data_offsets": []int64{off, off + n}}
		off += n
	}
	js, err := json.Marshal(entries)
	if err != nil {
		return nil, fmt.Errorf("encode safetensors header: %w", err)
	}
	for len(js)%8 != 0 { // pad to 8 bytes with spaces, as the reference writer does
		js = append(js, ' ')
	}
	out := make([]byte, 8, 8+int64(len(js))+off)
	binary.LittleEndian.PutUint64(out, uint64(len(js)))
	out = append(out, js...)
	return append(out, make([]byte, off)...), nil
}
