// Package archtest holds one test that fails on any import the package table in docs/design.md
// forbids, and on IO, clock or global-randomness use inside the policy core.
//
// The table is read from docs/design.md at test time, so the document and the check cannot drift:
// changing what a package may import means changing the design document. The rules for reading the
// "may import" column are written above the table itself.
package archtest
