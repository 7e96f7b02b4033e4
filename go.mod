module gpupool.dev/gpupool

go 1.26.8

require (
	github.com/spf13/cobra v1.10.2
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	k8s.io/api v0.37.2 // indirect
	k8s.io/apimachinery v0.37.2 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
