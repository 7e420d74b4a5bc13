// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

// Package journal keeps a crash journal of spans: a record of every
// sampled span that starts and of its end, in a file that outlives the
// process, so that the spans of a process killed at once (the OOM killer,
// a CUDA fatal error, a segfault, SIGKILL) are exported at the next start
// instead of dying with the batch processor's queue.
//
// # Use
//
//	j, err := journal.Open(dir)                       // this process's file
//	rep, err := journal.Recover(ctx, dir, exp)        // the dead ones' spans
//	tp := sdktrace.NewTracerProvider(
//		sdktrace.WithSpanProcessor(j.SpanProcessor()), // before the batcher
//		sdktrace.WithBatcher(j.WrapExporter(exp)))
//	...
//	_ = tp.Shutdown(ctx)
//	_ = j.Close()
//
// [Recover] reads every journal in dir whose process is gone (its lock
// is free: never one a live process holds, the caller's own included) and
// can run beside the engine, on its own goroutine. A command recovering
// a dead engine's directory calls it alone.
//
// # What is kept, and how
//
// The file is mapped MAP_SHARED: a record costs a copy into the mapping,
// no system call, and the kernel's page cache holds it from then on. The
// death of the process loses nothing written; a power loss or a kernel
// crash loses what the kernel had not yet written back, unless
// [WithSyncInterval] flushes it at an interval (then at most that
// interval). Flushing every record (a disk flush each, milliseconds) would
// cost the engine far more than its spans, and is not offered. On tmpfs
// (/dev/shm) nothing ever waits on a disk; nothing survives a reboot.
//
// Open allocates the file in full (fallocate), so that a full disk is an
// error at Open and never a SIGBUS at a page fault, and holds an flock on
// it while the journal is open: that is how Recover tells a live journal
// from a dead one, and why two processes never share a file. The file is
// made without a name (O_TMPFILE) and named once its header and lock are
// in place, so that a death in Open leaves nothing; where the file system
// cannot do that, it is made as .omni-PID-RANDOM.tmp, locked at once
// under the directory's shared lock, and renamed, and Recover removes a
// dead process's such file. A fault on the mapping that happens anyway (the file
// truncated under the journal, a copy-on-write file system out of room)
// is caught: the journal stops, counts it ([Stats].Faults) and logs it;
// the engine and its spans go on.
//
// The file holds a header (format version, layout, the heartbeat: the
// time, stored every [WithHeartbeat] interval as one 8-byte word), an area
// for resources and instrumentation scopes (each written once, referred
// to by number), and a ring of segments. A record is a 16-byte header
// (checksum, state, length, the segment's generation) and its payload.
// The checksum covers length, generation and payload and is stored last:
// a record cut short by the death, or a page torn by a power loss, fails
// it and is skipped (counted in [Report].Torn); recovery steps over what
// is not a record to the next one. The generation, bumped each time a
// segment is reused, keeps the records of its earlier use from being read
// as current. The state word, outside the checksum, turns from live to
// done in place when a record is no longer needed: a start record when
// its span's end is confirmed (or ended with attributes of its own), an
// end record when its export is confirmed ([Journal.WrapExporter] marks
// them once the exporter returns nil). A segment whose records are all
// done is free again; as a record's state is its own, segments are freed
// in any order.
//
// An end record holds the end time, status, events, links, dropped counts
// and the span's ids again; its attributes only when the span's changed
// since its start (the SDK copies a span's attributes when they change
// after they were read, so an unchanged slice is the same slice). Then the
// start record, which has them, stays live until the end is confirmed.
//
// # Bounds
//
// The file is [DefaultSize] (64 MiB) unless [WithSize] says otherwise.
// Every string is cut to [DefaultValueLimit] bytes at a UTF-8 boundary
// (counted in CutStrings); a record is at most a quarter of a segment and
// at most 1 MiB, and a span that would pass it keeps its first attributes,
// links and events that fit (the rest counted in CutItems and in the
// span's dropped counts). Strings that are not valid UTF-8 are kept as
// they are in the file; [Recover] makes them valid (each invalid sequence
// becomes U+FFFD), as otelsetup's exporter does for live spans, so that
// no exporter refuses a batch of recovered spans for one of them. A string
// to be cut is first made valid, as that exporter does before it cuts: a
// recovered string holds what the live path sends of it, never more than
// the limit. At most 256 distinct resources and scopes are told apart.
//
// When the ring runs short of free segments, a background goroutine
// compacts the segment with the fewest live records: it copies them into
// a segment kept free for it (open spans' starts, and ended spans not yet
// confirmed, while they take at most half a segment) and evicts the rest
// (counted in Evicted: spans that would not be recovered). A span never
// waits for room: with no free segment its record is dropped (counted in
// Dropped). Every count is logged once through otel.Handle.
//
// # Recovery
//
// Recover exports, in batches of [BatchSize], every span whose end was
// never confirmed, as it ended, and every span that never ended, as ended
// at the death, with status Error and error.type = process_died. The death
// is placed at the last heartbeat, or at the latest time a record holds
// within two heartbeat intervals after it (records written after the
// last heartbeat), never before the span's start. Every recovered span
// carries omni.recovered = true and the ids, trace flags and state, remote
// flags, resource and scope the dead process gave it: a stage's spans join
// the trace of the request that other processes carried on.
//
// A batch is marked in the file as soon as the exporter accepts it. This
// is at least once: a death between the exporter's acceptance and the
// marks (in the live process, the time it takes to mark the batch's
// records, well under a millisecond for 512 spans; in Recover, one write
// a record) sends that batch again, with the same ids,
// so a backend that keys on span ids keeps one copy. A file is removed
// once everything in it was exported; one that another format version
// wrote, whose header is damaged, that is not a regular file or that
// cannot be opened is counted, named in the error, and left in place,
// and the other files are read all the same.
//
// # Why its own encoding
//
// A record is written on the span's path, so its encoding must cost a
// copy and nothing else: no allocation, no reflection, no intermediate
// message. The OTLP protobuf message of a span (the form an exporter
// builds) costs 35 allocations and 2.3 kB of garbage per span
// (BenchmarkEncode/protobuf) against none for the journal's
// (BenchmarkEncode/journal), and several times its time; gob and JSON
// reflect. So records are a fixed prefix (ids, kind, flags, times,
// status, counts) and varint-prefixed strings and values, appended
// straight into the mapping under the ring's lock, in one pass.
package journal
