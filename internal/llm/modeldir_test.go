package llm

import (
	"io/fs"
	"math"
	"strings"
	"testing"
	"testing/fstest"
)

// A model directory is not trusted: special files are refused before they are opened, shards
// need their index, sizes are checked before reading, and errors do not quote file contents.
func TestLoadDirUntrustedFiles(t *testing.T) {
	shard1 := "model-00001-of-00002.safetensors"
	good := func() fstest.MapFS { return shard(t, llamaTensors(tinyArch(), "BF16"), 2, -1) }
	single := func() fstest.MapFS {
		return fstest.MapFS{ConfigFile: {Data: []byte(tinyConfig)}, SafetensorsFile: {Data: mustEncode(t, llamaTensors(tinyArch(), "BF16"), nil)}}
	}
	secret := "root:$6$s3cr3tHash:19000:0:99999:7:::"
	tests := []struct {
		name    string
		base    func() fstest.MapFS
		edit    func(fstest.MapFS)
		want    string
		notWant string
	}{
		{"config is a FIFO", good, func(f fstest.MapFS) { f[ConfigFile] = &fstest.MapFile{Mode: fs.ModeNamedPipe} },
			"read config.json: is a named pipe (FIFO), not a regular file", ""},
		{"shard is a device", good, func(f fstest.MapFS) { f[shard1] = &fstest.MapFile{Mode: fs.ModeDevice} },
			"read " + shard1 + ": is a device, not a regular file", ""},
		{"single file is a FIFO", single, func(f fstest.MapFS) { f[SafetensorsFile] = &fstest.MapFile{Mode: fs.ModeNamedPipe} },
			"read " + SafetensorsFile + ": is a named pipe (FIFO), not a regular file", ""},
		{"index is a socket", good, func(f fstest.MapFS) { f[IndexFile] = &fstest.MapFile{Mode: fs.ModeSocket} },
			"read " + IndexFile + ": is a socket, not a regular file", ""},
		{"one shard without the index", good, func(f fstest.MapFS) {
			delete(f, IndexFile)
			delete(f, "model-00002-of-00002.safetensors")
		}, shard1 + " is a shard of a sharded checkpoint, but " + IndexFile + " is missing", ""},
		{"config too large", good, func(f fstest.MapFS) {
			f[ConfigFile] = &fstest.MapFile{Data: make([]byte, MaxConfigBytes+1)}
		}, "read config.json: 4194305 bytes, larger than the 4194304-byte limit", ""},
		{"config is not JSON", good, func(f fstest.MapFS) { f[ConfigFile] = &fstest.MapFile{Data: []byte(secret)} },
			"parse config.json: not valid JSON (syntax error at byte 1)", "r"},
		{"header is not JSON", single, func(f fstest.MapFS) {
			f[SafetensorsFile] = &fstest.MapFile{Data: rawFile("{"+secret, 0)}
		}, "header is not a JSON object: not valid JSON", "s3cr3t"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.base()
			tt.edit(f)
			_, err := LoadDir(f)
			if err == nil {
				t.Fatal("LoadDir accepted it")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q lacks %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") || (tt.notWant != "" && strings.Contains(err.Error(), "'"+tt.notWant+"'")) {
				t.Errorf("error %q quotes the file's content", err)
			}
		})
	}
}

func TestCheckedArithmetic(t *testing.T) {
	if s, ok := addChecked(math.MaxInt64-1, 1); !ok || s != math.MaxInt64 {
		t.Errorf("addChecked(max-1, 1) = %d, %v", s, ok)
	}
	for _, c := range [][2]int64{{math.MaxInt64, 1}, {1 << 62, 1 << 62}, {-1, 5}, {5, -1}} {
		if _, ok := addChecked(c[0], c[1]); ok {
			t.Errorf("addChecked(%d, %d) did not report the overflow", c[0], c[1])
		}
	}
	if p, ok := mulChecked(1<<31, 1<<31); !ok || p != 1<<62 {
		t.Errorf("mulChecked(2^31, 2^31) = %d, %v", p, ok)
	}
	for _, c := range [][2]int64{{1 << 32, 1 << 31}, {math.MaxInt64, 2}, {-1, 2}} {
		if _, ok := mulChecked(c[0], c[1]); ok {
			t.Errorf("mulChecked(%d, %d) did not report the overflow", c[0], c[1])
		}
	}
}
