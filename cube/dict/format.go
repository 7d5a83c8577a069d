// Package dict reads and writes cube dictionaries: immutable uint64 -> bytes
// tables designed to be mapped read-only and looked up in O(1).
package dict

/*
The file format, version 1. All integers are little-endian.

	+---------------------------+ 0
	| header (96 bytes)         |
	+---------------------------+ 96 = values offset
	| values: records           |
	+---------------------------+ values offset + values size
	| zero padding to 8 bytes   |
	+---------------------------+ index offset (multiple of 8)
	| index: slots × 16 bytes   |
	+---------------------------+ index offset + 16*slots = file size

Values come first so that the writer can stream them straight into the
final file while the input is read; the index, whose size is known only at
the end, is appended after them.

Header:

	off size field
	  0    8 magic "CUBEDICT"
	  8    4 format version (FormatV1 = 1)
	 12    4 header size (96)
	 16    8 entry count (distinct keys)
	 24    8 slot count (> entry count, so every probe sequence ends)
	 32    8 index offset
	 40    8 values offset (96)
	 48    8 values size in bytes
	 56    8 largest value size in bytes
	 64    4 CRC-32C (Castagnoli) of the index section
	 68    4 CRC-32C of the values section
	 72   20 reserved, zero
	 92    4 CRC-32C of header bytes [0, 92)

Index: an open-addressing hash table with linear probing. Slot i is

	off size field
	  0    8 key
	  8    8 ref: 0 = empty slot; otherwise 1 + the offset of the value
	         record inside the values section

The home slot of a key is hi64(fmix64(key) * slots) (Lemire's fast range
reduction of MurmurHash3's 64-bit finalizer), so keys that share a residue
modulo the shard count still spread evenly.

Values: records, each referenced by exactly one slot, in any order:

	uvarint length, then length bytes

Per-entry overhead beyond the 8-byte key and the value bytes is therefore
8 bytes of ref, the uvarint length (1 byte up to 127 bytes, 2 up to 16 KiB)
and the empty slots: at the load factor of 0.8 used by the writer that is
16/0.8 - 8 + 1 = 13 bytes for a 40-byte value.

Validation on Open follows bbolt's meta.Validate: size, then magic
(ErrBadMagic), then version (ErrVersionMismatch), then header checksum,
section bounds (ErrTruncated), section checksums (ErrChecksum), and finally a
structural pass over the index (entry count, refs in range).
*/

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/bits"
)

// Format versions understood by this package.
const (
	FormatV1 uint32 = 1

	// FormatCurrent is what the Writer produces.
	FormatCurrent = FormatV1
)

const (
	magic      = "CUBEDICT"
	headerSize = 96
	slotSize   = 16

	// loadFactor is entries/slots for a freshly built index. Linear probing at
	// 0.8 averages 3 probes for a hit, all within one or two cache lines.
	loadFactorNum, loadFactorDen = 4, 5
)

// Sentinel errors returned (wrapped) by Open.
var (
	ErrBadMagic        = errors.New("dict: not a cube dictionary (bad magic)")
	ErrVersionMismatch = errors.New("dict: unsupported format version")
	ErrChecksum        = errors.New("dict: checksum mismatch")
	ErrTruncated       = errors.New("dict: truncated or inconsistent file")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type header struct {
	version      uint32
	count        uint64
	slots        uint64
	indexOffset  uint64
	valuesOffset uint64
	valuesSize   uint64
	maxValue     uint64
	indexCRC     uint32
	valuesCRC    uint32
}

func (h *header) marshal(b []byte) {
	clear(b[:headerSize])
	copy(b, magic)
	binary.LittleEndian.PutUint32(b[8:], h.version)
	binary.LittleEndian.PutUint32(b[12:], headerSize)
	binary.LittleEndian.PutUint64(b[16:], h.count)
	binary.LittleEndian.PutUint64(b[24:], h.slots)
	binary.LittleEndian.PutUint64(b[32:], h.indexOffset)
	binary.LittleEndian.PutUint64(b[40:], h.valuesOffset)
	binary.LittleEndian.PutUint64(b[48:], h.valuesSize)
	binary.LittleEndian.PutUint64(b[56:], h.maxValue)
	binary.LittleEndian.PutUint32(b[64:], h.indexCRC)
	binary.LittleEndian.PutUint32(b[68:], h.valuesCRC)
	binary.LittleEndian.PutUint32(b[92:], crc32.Checksum(b[:92], castagnoli))
}

// unmarshal validates and decodes a header against the file size.
func (h *header) unmarshal(b []byte, fileSize uint64) error {
	if len(b) < headerSize {
		return ErrTruncated
	}
	if string(b[:8]) != magic {
		return ErrBadMagic
	}
	h.version = binary.LittleEndian.Uint32(b[8:])
	if h.version != FormatV1 {
		return ErrVersionMismatch
	}
	if crc32.Checksum(b[:92], castagnoli) != binary.LittleEndian.Uint32(b[92:]) {
		return ErrChecksum
	}
	if binary.LittleEndian.Uint32(b[12:]) != headerSize {
		return ErrTruncated
	}
	h.count = binary.LittleEndian.Uint64(b[16:])
	h.slots = binary.LittleEndian.Uint64(b[24:])
	h.indexOffset = binary.LittleEndian.Uint64(b[32:])
	h.valuesOffset = binary.LittleEndian.Uint64(b[40:])
	h.valuesSize = binary.LittleEndian.Uint64(b[48:])
	h.maxValue = binary.LittleEndian.Uint64(b[56:])
	h.indexCRC = binary.LittleEndian.Uint32(b[64:])
	h.valuesCRC = binary.LittleEndian.Uint32(b[68:])
	switch {
	case h.valuesOffset != headerSize,
		h.slots == 0 || h.count >= h.slots || h.slots > (1<<40),
		h.valuesSize > fileSize,
		h.indexOffset != indexOffset(h.valuesSize),
		h.indexOffset+slotSize*h.slots != fileSize:
		return ErrTruncated
	}
	return nil
}

// fmix64 is MurmurHash3's 64-bit finalizer: a bijection with full avalanche.
func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// homeSlot maps a key to its first probe position in [0, slots).
func homeSlot(key, slots uint64) uint64 {
	hi, _ := bits.Mul64(fmix64(key), slots)
	return hi
}

// indexOffset is where the index starts after valuesSize bytes of values.
func indexOffset(valuesSize uint64) uint64 {
	return (headerSize + valuesSize + 7) &^ 7
}

// slotsFor returns the slot count for n entries at the writer's load factor.
func slotsFor(n uint64) uint64 {
	return n*loadFactorDen/loadFactorNum + 1
}
