// Package dict reads and writes cube dictionaries: immutable uint64 -> bytes
// tables designed to be mapped read-only and looked up in O(1).
package dict

/*
The file format. All integers are little-endian. The Writer produces version 2;
the reader takes versions 1 and 2, told apart by the header.

Version 2:

	+---------------------------+ 0
	| header (128 bytes)        |
	+---------------------------+ 128 = values offset
	| values: records           |   (empty in the inline layout)
	+---------------------------+ values offset + values size
	| zero padding to 64 bytes  |
	+---------------------------+ index offset (multiple of 64)
	| index: slots              |
	+---------------------------+ block table offset
	| block table: CRC-32C × n  |
	+---------------------------+ file size

The index has two layouts, chosen by the writer:

  - inline (every value of one size V, at most MaxInlineValue bytes — CTR
    embeddings are float32 × dim): slot i is (key, the V value bytes), so a
    lookup reads one place in memory. An empty slot holds the key 2^64-1;
    that key itself, if present, sits in one extra slot after the table
    (slots+1 slots of 8+V bytes; flag bit 0 says whether it is used).
  - referenced (values of any size): slot i is (key, ref) as in version 1,
    16 bytes, ref 0 = empty, else 1 + the offset of a record in the values
    section; a record is uvarint length, then the bytes.

Header:

	off size field
	  0    8 magic "CUBEDICT"
	  8    4 format version (2)
	 12    4 header size (128)
	 16    8 entry count (distinct keys)
	 24    8 slot count (table slots, the inline extra slot not counted)
	 32    8 index offset
	 40    8 values offset (128)
	 48    8 values size in bytes (0 inline)
	 56    8 largest value size in bytes (V inline)
	 64    4 slot size (16 referenced, 8+V inline)
	 68    4 V: inline value size; 0 = referenced layout
	 72    8 max probe: the most slots any key sits past its home slot, so
	         a lookup reads at most max probe + 1 slots
	 80    4 block shift: blocks are 1<<shift bytes (12..24)
	 84    4 flags (bit 0: the inline extra slot holds key 2^64-1; bit 1: the index is ordered, see flagOrdered)
	 88    8 block count
	 96    4 CRC-32C of the block table
	100   24 reserved, zero
	124    4 CRC-32C of header bytes [0, 124)

Blocks cut the bytes from the end of the header to the block table (values,
padding, index) into pieces of 1<<shift bytes, the last one shorter; the
block table holds each piece's CRC-32C. Opening checks the header and the
block table only; a block is checked against its CRC before any of its bytes
is read for the first time (or all at once at Open, unless
Options.VerifyOnTouch), so a shard serves as soon as it is mapped and never
serves a byte that was not checked. Lookups are bounded by max probe, so no
content of the index can make one run away.

The home slot of a key is hi64(fmix64(key) * slots) (Lemire's fast range
reduction of MurmurHash3's 64-bit finalizer), so keys that share a residue
modulo the shard count still spread evenly. Collisions probe linearly,
wrapping from the last slot to slot 0.

Per-entry overhead beyond the 8-byte key and the value bytes, at the load
factor of 0.8 used by the writer: referenced, 8 bytes of ref, the uvarint
length (1 byte up to 127 bytes, 2 up to 16 KiB) and the empty slots,
16/0.8 - 8 + 1 = 13 bytes for a 40-byte value; inline, only the empty slots,
(8+V)/0.8 - 8 = 12 bytes for a 40-byte value (0.25 V + 2 in general).

Version 1 (still read; written by earlier releases) is the referenced layout
with a 96-byte header and whole-section checksums:

	header (96) | values | pad to 8 | index: slots × 16

	off size field
	  0    8 magic "CUBEDICT"
	  8    4 format version (1)
	 12    4 header size (96)
	 16    8 entry count
	 24    8 slot count (> entry count, so every probe sequence ends)
	 32    8 index offset
	 40    8 values offset (96)
	 48    8 values size in bytes
	 56    8 largest value size in bytes
	 64    4 CRC-32C (Castagnoli) of the index section
	 68    4 CRC-32C of the values section
	 72   20 reserved, zero
	 92    4 CRC-32C of header bytes [0, 92)

A version 1 file is checked whole at Open (both sections against their
checksums, then a structural pass over the index), whatever the options.

Validation on Open follows bbolt's meta.Validate: size, then magic
(ErrBadMagic), then version (ErrVersionMismatch), then header checksum,
section bounds (ErrTruncated), checksums (ErrChecksum).
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
	FormatV2 uint32 = 2

	// FormatCurrent is what the Writer produces.
	FormatCurrent = FormatV2
)

// MaxInlineValue is the largest value size the Writer stores in the index
// slot: a dictionary whose values all have one size up to this is written in
// the inline layout. Past it the empty slots (a quarter of 8+V bytes a key)
// cost more memory than the second memory access saves time.
const MaxInlineValue = 512

const (
	magic        = "CUBEDICT"
	headerSizeV1 = 96
	headerSize   = 128 // version 2
	refSlotSize  = 16

	// indexAlign is where a version 2 index starts: a cache line.
	indexAlign = 64

	// defaultBlockShift makes 64 KiB blocks: checking one on first touch
	// takes microseconds, and the block table of a 3 GB shard is 180 KiB.
	defaultBlockShift       = 16
	minBlockShift, maxShift = 12, 24

	// emptyKey marks an empty inline slot.
	emptyKey = ^uint64(0)

	flagExtraKey = 1 // the inline extra slot holds emptyKey
	// flagOrdered: the index was built Robin Hood style (indexBuilder.place),
	// so a lookup may stop at the first key nearer to its home slot than the
	// lookup has walked. Without it a lookup stops only at an empty slot.
	flagOrdered = 2
	knownFlags  = flagExtraKey | flagOrdered

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

	// version 1
	indexCRC  uint32
	valuesCRC uint32

	// version 2
	slotSize   uint32
	inline     uint32 // V; 0 = referenced layout
	maxProbe   uint64
	blockShift uint32
	flags      uint32
	blocks     uint64
	blocksCRC  uint32
}

// indexSlots is the number of slots the index section holds: the inline
// layout has one extra.
func (h *header) indexSlots() uint64 {
	if h.inline > 0 {
		return h.slots + 1
	}
	return h.slots
}

// indexSize is the size of the index section in bytes.
func (h *header) indexSize() uint64 { return h.indexSlots() * uint64(h.slotSize) }

// blockTableOffset is where the version 2 block table starts.
func (h *header) blockTableOffset() uint64 { return h.indexOffset + h.indexSize() }

// blocksFor is the number of blocks covering a version 2 file whose block
// table starts at end.
func blocksFor(end uint64, shift uint32) uint64 {
	return (end - headerSize + 1<<shift - 1) >> shift
}

// field is one integer of a header: its offset and where it lives in a
// header struct (exactly one of u32, u64).
type field struct {
	off int
	u32 *uint32
	u64 *uint64
}

// fieldsV1 and fieldsV2 list each version's header integers after magic,
// version and header size, as the layout above has them: marshal and
// unmarshal both read this one list.
func (h *header) fieldsV1() []field {
	return []field{{16, nil, &h.count}, {24, nil, &h.slots}, {32, nil, &h.indexOffset}, {40, nil, &h.valuesOffset},
		{48, nil, &h.valuesSize}, {56, nil, &h.maxValue}, {64, &h.indexCRC, nil}, {68, &h.valuesCRC, nil}}
}

func (h *header) fieldsV2() []field {
	return []field{{16, nil, &h.count}, {24, nil, &h.slots}, {32, nil, &h.indexOffset}, {40, nil, &h.valuesOffset},
		{48, nil, &h.valuesSize}, {56, nil, &h.maxValue}, {64, &h.slotSize, nil}, {68, &h.inline, nil},
		{72, nil, &h.maxProbe}, {80, &h.blockShift, nil}, {84, &h.flags, nil}, {88, nil, &h.blocks}, {96, &h.blocksCRC, nil}}
}

// marshal writes a version 2 header.
func (h *header) marshal(b []byte) {
	le := binary.LittleEndian
	clear(b[:headerSize])
	copy(b, magic)
	le.PutUint32(b[8:], FormatV2)
	le.PutUint32(b[12:], headerSize)
	for _, f := range h.fieldsV2() {
		if f.u32 != nil {
			le.PutUint32(b[f.off:], *f.u32)
		} else {
			le.PutUint64(b[f.off:], *f.u64)
		}
	}
	le.PutUint32(b[124:], crc32.Checksum(b[:124], castagnoli))
}

// decode reads fs from b after checking the header's own checksum, stored
// at crcAt over the bytes before it, and its size.
func decode(b []byte, size, crcAt int, fs []field) error {
	le := binary.LittleEndian
	if len(b) < size {
		return ErrTruncated
	}
	if crc32.Checksum(b[:crcAt], castagnoli) != le.Uint32(b[crcAt:]) {
		return ErrChecksum
	}
	if le.Uint32(b[12:]) != uint32(size) {
		return ErrTruncated
	}
	for _, f := range fs {
		if f.u32 != nil {
			*f.u32 = le.Uint32(b[f.off:])
		} else {
			*f.u64 = le.Uint64(b[f.off:])
		}
	}
	return nil
}

// unmarshal validates and decodes a header of either version against the
// file size.
func (h *header) unmarshal(b []byte, fileSize uint64) error {
	if len(b) < headerSizeV1 {
		return ErrTruncated
	}
	if string(b[:8]) != magic {
		return ErrBadMagic
	}
	h.version = binary.LittleEndian.Uint32(b[8:])
	switch h.version {
	case FormatV1:
		return h.unmarshalV1(b, fileSize)
	case FormatV2:
		return h.unmarshalV2(b, fileSize)
	}
	return ErrVersionMismatch
}

func (h *header) unmarshalV1(b []byte, fileSize uint64) error {
	if err := decode(b, headerSizeV1, 92, h.fieldsV1()); err != nil {
		return err
	}
	h.slotSize = refSlotSize
	switch {
	case h.valuesOffset != headerSizeV1,
		h.slots == 0 || h.count >= h.slots || h.slots > (1<<40),
		h.valuesSize > fileSize,
		h.indexOffset != (headerSizeV1+h.valuesSize+7)&^7,
		h.indexOffset+refSlotSize*h.slots != fileSize:
		return ErrTruncated
	}
	h.maxProbe = h.slots // unbounded: the structural pass at Open guarantees an empty slot
	return nil
}

func (h *header) unmarshalV2(b []byte, fileSize uint64) error {
	if err := decode(b, headerSize, 124, h.fieldsV2()); err != nil {
		return err
	}
	extra := uint64(h.flags & flagExtraKey)
	switch {
	case h.valuesOffset != headerSize,
		h.slots == 0 || h.slots > (1<<40) || h.count-extra >= h.slots || h.count < extra,
		h.maxProbe >= h.slots,
		h.flags&^knownFlags != 0,
		h.inline == 0 && (h.slotSize != refSlotSize || extra != 0),
		h.inline > 0 && (h.inline > 1<<20 || h.slotSize != 8+h.inline || h.valuesSize != 0 || h.maxValue != uint64(h.inline)),
		h.blockShift < minBlockShift || h.blockShift > maxShift,
		h.valuesSize > fileSize,
		h.indexOffset != indexOffset(h.valuesSize),
		h.indexSize() > fileSize || h.blockTableOffset() > fileSize,
		h.blocks != blocksFor(h.blockTableOffset(), h.blockShift),
		h.blockTableOffset()+4*h.blocks != fileSize:
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

// distance is how many slots past its home slot key sits at slot at, in a
// table of slots slots, wrapping around.
func distance(key, at, slots uint64) uint64 {
	home := homeSlot(key, slots)
	if at < home {
		return at + slots - home
	}
	return at - home
}

// indexOffset is where a version 2 index starts after valuesSize bytes of
// values.
func indexOffset(valuesSize uint64) uint64 {
	return (headerSize + valuesSize + indexAlign - 1) &^ (indexAlign - 1)
}

// slotsFor returns the slot count for n entries at the writer's load factor.
func slotsFor(n uint64) uint64 {
	return n*loadFactorDen/loadFactorNum + 1
}
