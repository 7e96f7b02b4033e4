package main

import (
	"fmt"
	"os"

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
	return llm.LoadDir(root.FS())
}
