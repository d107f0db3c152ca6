package org.starling;

import org.junit.Before;

/** Test classes share the process's one context (MPI cannot restart within a process). */
public abstract class ContextTestBase {
  protected Context ctx;
  protected int rank;
  protected int size;

  @Before
  public void setUpContext() {
    ctx = TestSupport.context();
    rank = ctx.rank();
    size = ctx.size();
  }
}
