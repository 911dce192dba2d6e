// Placeholder until the nn helper lands the MLP demo.
int main() { return 0; }
