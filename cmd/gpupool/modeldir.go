package main

import (
	"fmt"
	"os"
	"strings"

	"gpupool.dev/gpupool/internal/llm"
)

// loadModelDir reads a Hugging Face model directory through an os.Root: no path, symbolic link
// included, can lead outside the directory, and llm.LoadDir itself reads regular files only,
// each within its size limit.
func loadModelDir(dir string) (llm.Model, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return llm.Model{}, err
	}
	if !st.IsDir() {
		return llm.Model{}, fmt.Errorf("%s is not a directory", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return llm.Model{}, err
	}
	defer root.Close()
	m, err := llm.LoadDir(root.FS())
	if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
		err = fmt.Errorf("%w (a symbolic link leads out of the model directory; gpupool reads only files inside it: "+
			"copy the files in, or give the directory the links point into)", err)
	}
	return m, err
}
