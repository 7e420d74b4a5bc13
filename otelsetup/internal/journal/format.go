// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"encoding/binary"
	"hash/crc32"
)

// The file: a header page, a definitions area (resources and scopes,
// append-only), then segCount segments of segSize bytes. All integers are
// little-endian.
const (
	fileMagic     = "OMNIJNL\x00"
	formatVersion = 1
	headerSize    = 4096

	// Header fields. Bytes [0, hdrCRC) are written once at Open and covered
	// by the CRC at hdrCRC; the heartbeat and the close time change later.
	hdrMagic     = 0  // [8]byte
	hdrVersion   = 8  // u32
	hdrSegSize   = 16 // u32
	hdrSegCount  = 20 // u32
	hdrDefsSize  = 24 // u32
	hdrInterval  = 32 // u64, heartbeat interval in nanoseconds
	hdrPID       = 40 // u64
	hdrCreated   = 48 // u64, Unix nanoseconds
	hdrCRC       = 56 // u32, crc32c of [0, hdrCRC)
	hdrHeartbeat = 64 // u64, Unix nanoseconds, stored atomically
	hdrClosed    = 72 // u64, Unix nanoseconds of a clean Close, or 0

	// A segment starts with its magic and its generation, which increases
	// each time the segment is reused; a record belongs to the segment only
	// when its header carries the same generation (low 32 bits), so the
	// records of an earlier use are never read as current.
	segHeaderSize = 16
	segMagic      = 0x31474553 // "SEG1"
	segGenOff     = 8          // u64, stored atomically

	// A record: [crc u32][state u32][len u32][gen u32] then len payload
	// bytes, padded to 8. The CRC covers len, gen and the payload (one run
	// of bytes), and is stored last: a record cut short by the death of its
	// writer, or by a torn page after a power loss, fails it and is
	// skipped. The state word lies outside the CRC: it turns from live to
	// done, in place, when the record is no longer needed (its span ended,
	// or its export was confirmed).
	recHeaderSize = 16
	recCRC        = 0
	recState      = 4
	recLen        = 8
	recGen        = 12

	stateLive uint32 = 0x4556494c // "LIVE"
	stateDone uint32 = 0x454e4f44 // "DONE"

	// defsGen is the generation of the definitions area's records.
	defsGen = 1
	// firstGen is the generation of a segment's first use.
	firstGen = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordCRC is the checksum of the record at b[0:] with n payload bytes:
// its length and generation words, then its payload.
func recordCRC(b []byte, n int) uint32 {
	return crc32.Update(0, castagnoli, b[recLen:recHeaderSize+n])
}

func align8(n int) int { return (n + 7) &^ 7 }

// recordSize is the space a record with n payload bytes takes.
func recordSize(n int) int { return align8(recHeaderSize + n) }

// putRecordHeader writes every header word of the record at b[0:] but the
// CRC, which publishes the record and is stored by the caller last.
func putRecordHeader(b []byte, n int, gen uint32) {
	binary.LittleEndian.PutUint32(b[recLen:], uint32(n))
	binary.LittleEndian.PutUint32(b[recGen:], gen)
	binary.LittleEndian.PutUint32(b[recState:], stateLive)
}

// geometry is the layout of one file.
type geometry struct {
	segSize  int
	segCount int
	defsSize int
}

func (g geometry) defsOff() int      { return headerSize }
func (g geometry) segOff(i int) int  { return headerSize + g.defsSize + i*g.segSize }
func (g geometry) fileSize() int     { return g.segOff(g.segCount) }
func (g geometry) segOf(loc int) int { return (loc - g.segOff(0)) / g.segSize }
func (g geometry) maxPayload() int   { return maxRecordPayload(g.segSize) }
func maxRecordPayload(seg int) int   { return min((seg-segHeaderSize)/4-recHeaderSize, maxRecordCap) }

// Bounds of the geometry.
const (
	minSegSize   = 256 << 10
	maxSegSize   = 8 << 20
	minDefsSize  = 16 << 10
	maxDefsSize  = 1 << 20
	maxRecordCap = 1 << 20
)

// geometryFor lays out a file of about total bytes: 16 segments where the
// total allows (a segment is freed whole, so more of them waste less), each
// a power of two between 256 KiB and 8 MiB, and a definitions area of a
// 64th, between 16 KiB and 1 MiB.
func geometryFor(total int) geometry {
	seg := minSegSize
	for seg < maxSegSize && seg*2*16 <= total {
		seg *= 2
	}
	defs := min(max(total/64, minDefsSize), maxDefsSize)
	defs = align8(defs)
	n := (total - headerSize - defs) / seg
	return geometry{segSize: seg, segCount: n, defsSize: defs}
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
