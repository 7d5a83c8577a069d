#include "textflag.h"

// func Line(addr *byte)
TEXT ·Line(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ addr+0(FP), AX
	PREFETCHT0 (AX)
	RET
