package control

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed console/*
var consoleFiles embed.FS

//go:embed openapi.json
var openapiJSON []byte

func consoleHandler() http.Handler {
	sub, _ := fs.Sub(consoleFiles, "console")
	return http.FileServerFS(sub)
}
