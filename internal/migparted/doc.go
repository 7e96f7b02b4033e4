// Package migparted reads and writes NVIDIA mig-parted configuration files and validates every
// named config against the boards of the gpu catalog it applies to.
//
// # Schema
//
// The file format is mig-parted's `v1` spec (github.com/NVIDIA/mig-parted, api/spec/v1):
//
//	version: v1
//	mig-configs:
//	  NAME:                        # the value of a node's nvidia.com/mig.config label
//	    - device-filter: ["0x233010DE", ...]   # optional: PCI device+vendor ids, one string or a list
//	      devices: all             # or a list of GPU indices on the node: [0, 1]
//	      mig-enabled: true        # the MIG mode to set
//	      mig-devices:             # required when mig-enabled is true ({} enables MIG with no instances)
//	        "1g.10gb": 2           # MIG profile name -> instance count
//	        "3g.40gb": 1
//
// # Decoding
//
// Decode is strict and reports every problem at once, each with its field path
// (`mig-configs.all-balanced[0].mig-devicez: unknown field`): unknown fields; version other than
// v1; mig-configs missing or empty; a config that is not a non-empty list; devices and mig-enabled
// missing; devices neither `all` nor a non-empty list of unique non-negative integers;
// device-filter neither a string nor a list of strings of the form 0x + 8 hex digits (device then
// vendor, optionally `:0x` + 8 hex digits of subsystem), or with duplicates; mig-devices not a
// mapping of profile names (`[Nc.]Ng.Mgb[+attr|-attr]`, e.g. 1c.3g.40gb, 1g.10gb+me,
// 1g.24gb+me.all, 1g.24gb-me) to counts; mig-devices missing when MIG is enabled or non-empty when
// it is disabled. Duplicate YAML keys are errors, and so are keys that differ in YAML but are one
// key once read (1, "1" and 1.0; true and "true"), which the conversion would resolve by map order.
//
// Decode is stricter than mig-parted in four places, all of which make a file ambiguous or
// meaningless rather than invalid to mig-parted: a count of 0, an empty device-filter, a null
// value, and a duplicate device-filter id are errors here.
//
// YAML 1.1, which mig-parted also reads, turns unquoted on/off/yes/no/true/false into booleans
// (a config named `on` is read as "true") and unquoted 0x233010DE into a number, which Decode then
// rejects as a device-filter. Encode quotes such names and always quotes ids and profile names.
//
// Named configs keep their file order (read with an order-preserving second YAML pass, since the
// strict YAML-to-JSON conversion loses map order). After Decode, an entry's MigDevices is nil
// when MIG is disabled and non-nil when it is enabled, so Decode(Encode(c)) equals c for every c
// Decode returns. Encode writes mig-devices sorted by profile name.
//
// # Which boards an entry applies to
//
// mig-parted walks a config's entries in order and applies each to every GPU of the node whose
// PCI id matches the entry's device-filter (every GPU when it has none) and whose index is in
// devices. Validate mirrors that over the catalog instead of a node:
//
//   - An entry with a device-filter applies to the boards gpu.ByPCIDeviceID finds for its ids
//     (the subsystem part of an id is ignored, so the match may be wider than on a node). An id
//     that names no board is a warning: the catalog does not know that hardware.
//   - An entry without a device-filter applies, in NVIDIA's files, to whatever GPU the node has:
//     `all-3g.40gb` is meant for the boards that have 3g.40gb, and selecting it on an A100-40GB
//     node fails in mig-parted. So it is validated against every MIG board that has all of its
//     profiles (every MIG board when it names none). When it names a profile no board has, that is
//     a warning, like an unknown id. When each profile exists somewhere but no board has them all,
//     that is an error. When the entry fits some of those boards but not others (NVIDIA's
//     `all-1g.24gb` wants 4 instances, which the RTX PRO 5000's 2 memory slices cannot hold), the
//     others are marked not applicable and their problems become warnings; when it fits none of
//     them, the problems stay errors.
//   - With Options.Board, that board is the only one: entries whose filter names one of its ids
//     and all entries without a filter are validated against it, strictly (a missing profile is an
//     error, since mig-parted would apply the entry there); a config none of whose entries applies
//     is a warning (mig-parted would leave the GPU unchanged).
//
// Each (config, entry, board) check verifies that the board has MIG when the entry enables it,
// that every profile exists on the board (`Nc.` compute-instance prefixes are stripped: mig-parted
// creates one GPU instance, holding one compute instance of N slices, per count), and that the
// counts have a legal placement (gpu.Board.Place); the placed layout is part of the report
// (`2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4`). Two entries of one config that reach the same
// board and GPU indices are a warning: the later entry wins on those GPUs. Errors carry the config
// name, entry index, board and profile; Report.Summary counts configs, checks, failures,
// not-applicable checks, errors and warnings.
package migparted
