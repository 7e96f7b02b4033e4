// Command promparse reads Prometheus text exposition from stdin, parses it with the Prometheus
// text parser (prometheus/common/expfmt) and prints each family's name, type and sample count;
// it exits 1 when the text does not parse or a family repeats.
//
//	curl -s http://127.0.0.1:8080/metrics | go run ./testdata/review4/promparse
package main

import (
	"fmt"
	"os"
	"sort"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func main() {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "parse:", err)
		os.Exit(1)
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := fams[n]
		fmt.Printf("%-60s %-10s %d\n", n, f.GetType(), len(f.GetMetric()))
	}
	fmt.Printf("%d families parsed\n", len(fams))
}
