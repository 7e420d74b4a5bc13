//go:build race

// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package main

// raceEnabled: the test binary runs under the race detector, which slows
// it and grows its memory several times.
const raceEnabled = true
