// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package input reads one input line by line, in whichever form it is
// (told by its content), and hands each request on once complete: it
// gathers a log's records of one request (its [OmniTiming] line, its box
// tables, its event dicts, each of which may span lines) until settled,
// follows a summary dict over as many lines as it takes, holding each
// request's entries as text until it ends (reading a summary too large to
// hold again, in parts), and keeps what a checkpoint needs to resume a
// followed log exactly once. Its memory is bounded by its settings, never
// by the input's length. A [Joiner] holds the requests of all inputs but
// the last until their other forms are read.
package input
