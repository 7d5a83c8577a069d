package seqfile

import (
	"encoding/binary"
	"io"
)

// A block-compressed file (Hadoop's BlockCompressWriter) is the header, then
// blocks, each:
//
//	int32 -1 | sync marker (16 bytes)            the escape that starts a block
//	vint     records (>= 1: Hadoop writes a block only when it holds records)
//	vint n | n compressed bytes                  key lengths: one vint per record
//	vint n | n compressed bytes                  keys, concatenated
//	vint n | n compressed bytes                  value lengths: one vint per record
//	vint n | n compressed bytes                  values, concatenated
//
// and the file ends right after a block. Each section is one independent
// stream of the file's codec.

// Block sections, in file order.
const (
	secKeyLens = iota
	secKeys
	secValLens
	secVals
	numSections
)

var sectionNames = [numSections]string{"key lengths", "keys", "value lengths", "values"}

// block is the block being read: its decompressed sections (buffers reused
// from block to block) and cursors into them.
type block struct {
	off  int64 // where the block starts in the file
	n, i int   // records in the block, records returned
	sec  [numSections][]byte

	keyLens, keys, valLens, vals []byte // what is left of each section
}

// next returns the next key and value of the block, or ok == false at its
// end. The lengths were validated when the block was read.
func (b *block) next() (key, val []byte, ok bool) {
	if b.i >= b.n {
		return nil, nil, false
	}
	b.i++
	kl, n := parseVInt(b.keyLens)
	b.keyLens = b.keyLens[n:]
	key, b.keys = b.keys[:kl], b.keys[kl:]
	vl, n := parseVInt(b.valLens)
	b.valLens = b.valLens[n:]
	val, b.vals = b.vals[:vl], b.vals[vl:]
	return key, val, true
}

func (rd *Reader) nextInBlock() (uint64, []byte, error) {
	for {
		if key, val, ok := rd.blk.next(); ok {
			return rd.decode(rd.blk.off, key, val)
		}
		if err := rd.readBlock(); err != nil {
			return 0, nil, err
		}
	}
}

// readBlock reads, decompresses and validates the next block. At the end of
// the file it returns io.EOF.
func (rd *Reader) readBlock() error {
	off := rd.off
	b, err := rd.readFull(4)
	if err == io.EOF {
		return rd.atEOF()
	}
	if err != nil {
		return rd.errf(off, err, "truncated block sync escape")
	}
	if esc := int32(binary.BigEndian.Uint32(b)); esc != -1 {
		return rd.errf(off, nil, "block starts with %d, want the sync escape -1", esc)
	}
	if err := rd.readSync(off); err != nil {
		return err
	}
	nOff := rd.off
	n, err := rd.readVInt()
	if err != nil {
		return rd.errf(nOff, err, "truncated block record count")
	}
	// Every record takes at least one byte in each lengths section.
	if maxN := int64(rd.opts.MaxBlock / 2); n < 1 || n > maxN {
		return rd.errf(nOff, nil, "block record count %d out of range [1, %d]", n, maxN)
	}
	rd.blk.off, rd.blk.n, rd.blk.i = off, int(n), 0
	budget := rd.opts.MaxBlock
	for i := range rd.blk.sec {
		if err := rd.readSection(i, budget); err != nil {
			return err
		}
		budget -= len(rd.blk.sec[i])
	}
	if err := rd.checkLengths(secKeyLens, secKeys, nOff); err != nil {
		return err
	}
	if err := rd.checkLengths(secValLens, secVals, nOff); err != nil {
		return err
	}
	rd.blk.keyLens, rd.blk.keys = rd.blk.sec[secKeyLens], rd.blk.sec[secKeys]
	rd.blk.valLens, rd.blk.vals = rd.blk.sec[secValLens], rd.blk.sec[secVals]
	return nil
}

// readSection reads section i and decompresses it into at most budget bytes.
func (rd *Reader) readSection(i, budget int) error {
	off := rd.off
	name := sectionNames[i]
	l, err := rd.readVInt()
	if err != nil {
		return rd.errf(off, err, "block %s: truncated compressed length", name)
	}
	// No codec expands data by more than a few percent, so a compressed
	// length well beyond what may come out of it is corrupt.
	if maxL := int64(budget) + int64(budget)/4 + 4096; l < 0 || l > maxL {
		return rd.errf(off, nil, "block %s: compressed length %d out of range [0, %d]", name, l, maxL)
	}
	src, err := rd.readFull(int(l))
	if err != nil {
		return rd.errf(off, err, "block %s: truncated (%d compressed bytes)", name, l)
	}
	if rd.blk.sec[i], err = rd.codec.decompress(rd.blk.sec[i], src, budget); err != nil {
		return rd.errf(off, err, "block %s (%d compressed bytes, at most %d decompressed)", name, l, budget)
	}
	return nil
}

// checkLengths checks that the lengths section holds exactly one length per
// record, each within MaxRecord, adding up to the data section's size.
func (rd *Reader) checkLengths(lensSec, dataSec int, off int64) error {
	lens, total := rd.blk.sec[lensSec], 0
	for i := range rd.blk.n {
		l, n := parseVInt(lens)
		if n == 0 {
			return rd.errf(off, nil, "block %s: %d of %d records", sectionNames[lensSec], i, rd.blk.n)
		}
		if l < 0 || l > int64(rd.opts.MaxRecord) {
			return rd.errf(off, nil, "block %s: record %d: length %d out of range [0, %d]", sectionNames[lensSec], i, l, rd.opts.MaxRecord)
		}
		lens, total = lens[n:], total+int(l)
	}
	if len(lens) != 0 {
		return rd.errf(off, nil, "block %s: %d bytes left after %d records", sectionNames[lensSec], len(lens), rd.blk.n)
	}
	if got := len(rd.blk.sec[dataSec]); total != got {
		return rd.errf(off, nil, "block %s add up to %d bytes, but the %s are %d bytes", sectionNames[lensSec], total, sectionNames[dataSec], got)
	}
	return nil
}
