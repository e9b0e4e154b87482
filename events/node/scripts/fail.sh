#!/bin/bash
echo "intentional failure for verification" >&2
exit 1
