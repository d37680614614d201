// Package plural makes counts in messages agree with their noun ("1
// problem", "2 problems"), for every package that prints to people: one
// helper instead of a copy in each.
package plural
