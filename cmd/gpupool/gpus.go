package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"gpupool.dev/gpupool/internal/gpu"
)

// gpuUnverifiedFootnote explains the "?" mark of table output.
const gpuUnverifiedFootnote = "? = unverified: inferred or datasheet value, not seen in driver output or an NVIDIA table " +
	"(-o json|yaml lists these fields under \"unverified\")"

func newGpusCmd(e *env) *cobra.Command {
	var output *string
	cmd := &cobra.Command{
		Use:   "gpus [BOARD]",
		Short: "List GPU boards, or show one board's facts and MIG profile table",
		Long: "gpus lists the boards gpupool knows: memory, SMs, bandwidth, TDP, dense BF16/FP8 TFLOPS and\n" +
			"MIG profile count. With BOARD (a name, alias or NVML name, e.g. H100, \"NVIDIA H200\") it shows\n" +
			"that board's facts and its MIG profiles: NVML id, compute and memory slices, usable MiB, SMs,\n" +
			"max count, legal start slices and engines. Values marked ? are unverified.",
		Example: "  gpupool gpus\n  gpupool gpus H100-SXM5-80GB\n  gpupool gpus \"NVIDIA H200\" -o json",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := parseOutput(*output)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				if f != outTable {
					return writeStructured(e.stdout, f, gpu.Boards())
				}
				return gpusListTable(e.stdout, gpu.Boards())
			}
			b, err := gpu.Lookup(args[0])
			if err != nil {
				return invalid(err)
			}
			if f != outTable {
				return writeStructured(e.stdout, f, b)
			}
			return gpusBoardTable(e.stdout, b)
		},
	}
	output = addOutputFlag(cmd)
	return cmd
}

// gpuMark appends "?" to s when the value is unverified.
func gpuMark(s string, unverified bool) string {
	if unverified {
		return s + "?"
	}
	return s
}

// gpuNum formats a float without trailing zeros; 0 reads "-".
func gpuNum(v float64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// gpuOr returns s, or "unknown" when s is empty.
func gpuOr(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// gpuCount formats an int; 0 (unknown) reads "?" on its own.
func gpuCount(n int) string {
	if n == 0 {
		return "?"
	}
	return strconv.Itoa(n)
}

func gpusListTable(w io.Writer, boards []*gpu.Board) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tARCH\tMEMORY\tSMS\tBANDWIDTH\tTDP\tBF16 TFLOPS\tFP8 TFLOPS\tMIG PROFILES")
	for _, b := range boards {
		u := b.IsUnverified
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", b.Name, b.Arch,
			gpuMark(fmt.Sprintf("%.1f GiB", b.MemoryGiB()), u("memoryMiB")),
			gpuMark(gpuCount(b.SMs), u("sms") && b.SMs != 0),
			gpuMark(gpuNum(b.BandwidthGBs)+" GB/s", u("bandwidthGBs")),
			gpuMark(gpuNum(b.TDPWatts)+" W", u("tdpWatts")),
			gpuMark(gpuNum(b.BF16TFLOPS), u("bf16Tflops")),
			gpuMark(gpuNum(b.FP8TFLOPS), u("fp8Tflops")),
			len(b.Profiles))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "\n"+gpuUnverifiedFootnote+"; FP8 - = no FP8 tensor cores or unknown")
	return err
}

func gpusBoardTable(w io.Writer, b *gpu.Board) error {
	u := b.IsUnverified
	tw := newTable(w)
	rows := [][2]string{
		{"Board", b.Name},
		{"Aliases", strings.Join(b.Aliases, ", ")},
		{"Architecture", b.Arch + ", compute capability " + gpuOr(b.ComputeCapability) + ", MIG since driver " + gpuOr(b.MinDriver)},
		{"NVML names", strings.Join(b.NVMLNames, ", ")},
		{"PCI device ids", strings.Join(b.PCIDeviceIDs, ", ")},
		{"Memory", gpuMark(fmt.Sprintf("%d MiB (%.1f GiB)", b.MemoryMiB, b.MemoryGiB()), u("memoryMiB"))},
		{"SMs", gpuMark(gpuCount(b.SMs), u("sms") && b.SMs != 0) + " (" + gpuMark(gpuCount(b.SMsInMIG), u("smsInMig") && b.SMsInMIG != 0) + " in MIG mode)"},
		{"Bandwidth", gpuMark(gpuNum(b.BandwidthGBs)+" GB/s", u("bandwidthGBs"))},
		{"TDP", gpuMark(gpuNum(b.TDPWatts)+" W", u("tdpWatts"))},
		{"GPU link", gpuLink(b.Interconnect)},
		{"BF16 dense", gpuMark(gpuNum(b.BF16TFLOPS)+" TFLOPS", u("bf16Tflops"))},
		{"FP8 dense", gpuMark(gpuNum(b.FP8TFLOPS)+" TFLOPS", u("fp8Tflops"))},
		{"MIG", fmt.Sprintf("%d memory slices, %d compute slices, at most %d instances", b.MemorySlices, b.ComputeSlices, b.MaxInstances)},
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := gpusProfileTable(w, b); err != nil {
		return err
	}
	for _, n := range b.Notes {
		fmt.Fprintln(w, "note: "+n)
	}
	for _, s := range b.Sources {
		fmt.Fprintln(w, "source: "+s)
	}
	_, err := fmt.Fprintln(w, "\n"+gpuUnverifiedFootnote)
	return err
}

func gpusProfileTable(w io.Writer, b *gpu.Board) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "PROFILE\tID\tCOMPUTE\tMEMORY\tMIB\tSMS\tMAX\tSTARTS\tDEC/JPG/OFA/ENC/CE")
	for i := range b.Profiles {
		p := &b.Profiles[i]
		u := p.IsUnverified
		id := "?"
		if p.ID >= 0 {
			id = gpuMark(strconv.Itoa(p.ID), u("id"))
		}
		starts := make([]string, len(p.Starts))
		for j, s := range p.Starts {
			starts[j] = strconv.Itoa(s)
		}
		e := p.Engines
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d/%d\t%s\t%s\t%s\t%s\t%s\n", p.Name, id,
			p.ComputeSlices, b.ComputeSlices, p.MemorySlices, b.MemorySlices,
			gpuMark(strconv.FormatInt(p.MemoryMiB, 10), u("memoryMiB")),
			gpuMark(gpuCount(p.SMs), u("sms") && p.SMs != 0),
			gpuMark(strconv.Itoa(p.MaxCount), u("maxCount")),
			gpuMark(strings.Join(starts, ","), u("starts")),
			gpuMark(fmt.Sprintf("%d/%d/%d/%d/%d", e.NVDEC, e.NVJPG, e.OFA, e.NVENC, e.CopyEngines), u("engines")))
	}
	return tw.Flush()
}

// gpuLink describes a board's GPU-to-GPU link: "nvlink4, 450 GB/s each way, 8 GPUs".
func gpuLink(ic gpu.Interconnect) string {
	if ic.Kind == "" {
		return "unknown"
	}
	return fmt.Sprintf("%s, %s GB/s each way, %d GPUs", ic.Kind, gpuNum(ic.GBs), ic.MaxGPUs)
}
