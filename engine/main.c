/* main.c — the orch command line (being written; replaced by the CLI). */
#include <stdio.h>
int main(void)
{
    fputs("orch: no commands yet\n", stderr);
    return 2;
}
