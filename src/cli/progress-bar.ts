/**
 * A one-line progress bar redrawn in place with a carriage return, on a
 * terminal only: piped stderr gets nothing, so logs stay clean.
 */
export class ProgressBar {
  readonly #out: NodeJS.WriteStream;
  readonly #total: number;
  readonly #label: string;
  readonly #enabled: boolean;
  #lastPercent = -1;

  constructor(out: NodeJS.WriteStream, total: number, label: string, enabled: boolean) {
    this.#out = out;
    this.#total = total;
    this.#label = label;
    this.#enabled = enabled && out.isTTY === true && total > 0;
  }

  update(done: number): void {
    if (!this.#enabled) return;
    const percent = Math.floor((done / this.#total) * 100);
    if (percent === this.#lastPercent) return;
    this.#lastPercent = percent;
    const width = 30;
    const filled = Math.round((percent / 100) * width);
    this.#out.write(`\r${this.#label} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${done}/${this.#total} ${percent}%`);
  }

  finish(): void {
    if (this.#enabled && this.#lastPercent >= 0) this.#out.write('\n');
  }
}
