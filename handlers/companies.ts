export const companyHandlers = {};
