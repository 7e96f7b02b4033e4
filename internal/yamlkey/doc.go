// Package yamlkey groups the keys of a YAML mapping by the JSON key they become.
//
// gpupool reads YAML by converting it to JSON (sigs.k8s.io/yaml, on the YAML 1.1 reader). Keys
// that YAML reads as different values, 1, "1", 0x1 and 1.0, or true and "true", become one JSON
// key, and the conversion keeps whichever its map order meets last: the same text could decode
// to different values from one read to the next. The pool, plan and mig-parted readers use this
// package to find such keys and refuse them as repeated keys, with the same error on every read.
package yamlkey
